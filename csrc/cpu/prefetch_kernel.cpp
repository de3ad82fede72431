// Asynchronous reads of a memory-mapped table's rows before a gather: one
// madvise(MADV_WILLNEED) per run of pages the rows cover (the ids sorted, adjacent rows merged),
// so the kernel queues all of a batch's reads at once instead of the gather faulting them in
// one by one (a fault waits for its read; with read-ahead off, a 4 KiB one).
#include <ATen/ATen.h>
#include <sys/mman.h>
#include <torch/library.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace graphengine {
namespace {

template <typename index_t>
std::vector<int64_t> rows_to_read(const at::Tensor& index, int64_t num_rows,
                                  const int32_t* slot_of) {
  const index_t* ids = index.data_ptr<index_t>();
  std::vector<int64_t> rows;
  rows.reserve(index.numel());
  for (int64_t i = 0; i < index.numel(); ++i) {
    const int64_t id = ids[i];
    // Bad ids are the gather's to report; cached rows are not read from the table.
    if (id >= 0 && id < num_rows && (slot_of == nullptr || slot_of[id] < 0)) {
      rows.push_back(id);
    }
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

int64_t prefetch_rows_cpu(const at::Tensor& src, const at::Tensor& index,
                          const std::optional<at::Tensor>& slot_of) {
  TORCH_CHECK(src.dim() == 2 && (src.size(1) <= 1 || src.stride(1) == 1),
              "prefetch_rows: 'src' must be 2-D with contiguous rows (got ", src.sizes(), ")");
  TORCH_CHECK(index.dim() == 1 && index.is_contiguous() &&
                  (index.scalar_type() == at::kInt || index.scalar_type() == at::kLong),
              "prefetch_rows: 'index' must be a contiguous 1-D int32 or int64 tensor");
  const int32_t* slots = nullptr;
  if (slot_of.has_value()) {
    TORCH_CHECK(slot_of->scalar_type() == at::kInt && slot_of->is_contiguous() &&
                    slot_of->dim() == 1 && slot_of->numel() == src.size(0),
                "prefetch_rows: 'slot_of' must be a contiguous int32 [", src.size(0), "] tensor");
    slots = slot_of->data_ptr<int32_t>();
  }
  std::vector<int64_t> rows = index.scalar_type() == at::kInt
                                  ? rows_to_read<int32_t>(index, src.size(0), slots)
                                  : rows_to_read<int64_t>(index, src.size(0), slots);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(src.data_ptr());
  const uintptr_t stride = src.stride(0) * src.element_size();
  const uintptr_t row_bytes = std::max<int64_t>(src.size(1), 1) * src.element_size();
  int64_t calls = 0;
  uintptr_t first = 0, last = 0;  // the pages of the run being merged: [first, last)
  auto flush = [&] {
    if (last > first) {
      madvise(reinterpret_cast<void*>(first), last - first, MADV_WILLNEED);  // a hint: no check
      ++calls;
    }
  };
  for (const int64_t row : rows) {
    const uintptr_t start = (base + row * stride) / page * page;
    const uintptr_t end = (base + row * stride + row_bytes + page - 1) / page * page;
    if (start > last) {
      flush();
      first = start;
    }
    last = std::max(last, end);
  }
  flush();
  return calls;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) { m.impl("prefetch_rows", &prefetch_rows_cpu); }

}  // namespace graphengine
