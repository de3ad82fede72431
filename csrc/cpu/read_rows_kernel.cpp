// Rows of a row-major table read straight from a file descriptor, many reads in flight.
//
// A page fault on a memory map reads one page and waits for it, so a thread keeps one read in
// flight; a disk (an SSD, a virtual disk) answers many times more reads a second when many are
// queued at once. The ids are sorted and deduplicated, rows that are adjacent in the file are
// merged into one read (runs), and the runs are read with up to queue_depth requests in flight:
// - "io_uring": a ring per calling thread, driven through the raw syscalls (no liburing);
// - "pread": a persistent pool of queue_depth threads each issuing blocking preads.
// With O_DIRECT (align > 0) a run's span is widened to the alignment and read into an aligned
// bounce buffer; the rows are then copied out. A read that comes back short (the file was
// truncated or replaced) is an error naming the row, never zeros passed on.
#include <ATen/ATen.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <torch/library.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace graphengine {
namespace {

constexpr int64_t kMaxRunBytes = 128 * 1024;  // longer runs would serialize a sorted batch
constexpr int64_t kMaxQueueDepth = 4096;

// One read request: the span [file_start, file_start + length) of the file into buf, which
// must return at least `needed` bytes (the span's tail past the file's end may be missing
// under O_DIRECT, where the span is rounded up to the alignment).
struct Run {
  size_t begin, end;  // its (id, position) pairs: sorted[begin, end)
  int64_t file_start, length, needed;
  int64_t done = 0;
  char* buf = nullptr;
  bool bounced = true;  // read into the scratch buffer, rows copied out after
  std::string error;
};

struct Table {
  int fd;
  int64_t offset, row_bytes;
  std::vector<std::pair<int64_t, int64_t>> sorted;  // (id, position in ids), by id
};

std::string strerror_text(int code) {
  char text[256];
  const char* message = strerror_r(code, text, sizeof(text));  // GNU: may not use text
  return std::string(message);
}

void record_errno(const Table& table, Run& run, int code) {
  std::ostringstream message;
  const int64_t id = table.sorted[run.begin].first;
  message << "read_rows: reading row " << id << " (byte offset " << table.offset + id * table.row_bytes
          << " of the file, " << run.length - run.done << " bytes at " << run.file_start + run.done
          << ") failed: " << strerror_text(code) << " (errno " << code << ")";
  run.error = message.str();
}

// The file ended inside the run: name the first row that did not come back whole.
void record_short_read(const Table& table, Run& run) {
  const int64_t got_end = run.file_start + run.done;
  for (size_t k = run.begin; k < run.end; ++k) {
    const int64_t id = table.sorted[k].first;
    const int64_t row_start = table.offset + id * table.row_bytes;
    if (row_start + table.row_bytes > got_end) {
      std::ostringstream message;
      message << "read_rows: row " << id << " at byte offset " << row_start
              << " of the file came back short: " << std::max<int64_t>(0, got_end - row_start)
              << " of its " << table.row_bytes
              << " bytes (the file ends early: truncated or replaced while open?)";
      run.error = message.str();
      return;
    }
  }
  run.error = "read_rows: a read came back short";
}

// What one completion of `result` bytes (or -errno) means for a run; true when it needs
// another read (a partial read, or an interrupted one).
bool account(const Table& table, Run& run, int64_t result) {
  if (result == -EINTR || result == -EAGAIN) return true;
  if (result < 0) {
    record_errno(table, run, static_cast<int>(-result));
    return false;
  }
  run.done += result;
  if (run.done >= run.needed) return false;
  if (result == 0) {
    record_short_read(table, run);
    return false;
  }
  return true;
}

// ---- pread engine: a persistent pool per queue depth --------------------------------------

struct Batch {
  const Table* table;
  std::vector<Run>* runs;
  std::atomic<size_t> next{0};
  std::atomic<int64_t> reads{0}, bytes{0};
  size_t finished = 0;  // guarded by mutex
  std::mutex mutex;
  std::condition_variable done;
};

void pread_run(Batch& batch, Run& run) {
  const Table& table = *batch.table;
  int64_t reads = 0, bytes = 0;
  while (true) {
    ssize_t got = pread(table.fd, run.buf + run.done, run.length - run.done,
                        run.file_start + run.done);
    ++reads;
    const int64_t result = got < 0 ? -static_cast<int64_t>(errno) : got;
    if (got > 0) bytes += got;
    if (!account(table, run, result)) break;
  }
  batch.reads += reads;
  batch.bytes += bytes;
}

class PreadPool {
 public:
  explicit PreadPool(int64_t threads) {
    for (int64_t t = 0; t < threads; ++t) std::thread([this] { work(); }).detach();
  }

  void run(Batch& batch) {
    const size_t count = batch.runs->size();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(&batch);
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(batch.mutex);
    batch.done.wait(lock, [&] { return batch.finished == count; });
  }

 private:
  void work() {
    while (true) {
      Batch* batch;
      size_t index;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        batch = queue_.front();
        index = batch->next.fetch_add(1);
        if (index + 1 >= batch->runs->size()) queue_.pop_front();  // its last run is claimed
      }
      if (index >= batch->runs->size()) continue;
      pread_run(*batch, (*batch->runs)[index]);
      std::lock_guard<std::mutex> lock(batch->mutex);
      if (++batch->finished == batch->runs->size()) batch->done.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Batch*> queue_;
};

PreadPool& pool_of_depth(int64_t depth) {
  static std::mutex mutex;
  // Never destroyed: the detached workers outlive static destruction at exit.
  static auto* pools = new std::map<int64_t, std::unique_ptr<PreadPool>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& pool = (*pools)[depth];
  if (!pool) pool = std::make_unique<PreadPool>(depth);
  return *pool;
}

std::pair<int64_t, int64_t> read_with_pread(const Table& table, std::vector<Run>& runs,
                                            int64_t depth) {
  Batch batch;
  batch.table = &table;
  batch.runs = &runs;
  if (depth == 1 || runs.size() == 1) {  // one in flight: the calling thread reads
    for (Run& run : runs) pread_run(batch, run);
  } else if (!runs.empty()) {
    pool_of_depth(depth).run(batch);
  }
  return {batch.reads.load(), batch.bytes.load()};
}

// ---- io_uring engine: a ring per calling thread ------------------------------------------

int io_uring_setup_call(unsigned entries, io_uring_params* params) {
  return static_cast<int>(syscall(__NR_io_uring_setup, entries, params));
}

int io_uring_enter_call(int fd, unsigned to_submit, unsigned min_complete, unsigned flags) {
  return static_cast<int>(
      syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, nullptr, 0));
}

class Ring {
 public:
  // Throws (with errno's text) where the kernel refuses a ring: ENOSYS, EPERM (seccomp or
  // kernel.io_uring_disabled), ENOMEM (locked memory limit).
  explicit Ring(unsigned entries) {
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    fd_ = io_uring_setup_call(entries, &params);
    TORCH_CHECK(fd_ >= 0, "read_rows: io_uring_setup failed: ", strerror_text(errno), " (errno ",
                errno, ")");
    entries_ = params.sq_entries;
    sq_len_ = params.sq_off.array + params.sq_entries * sizeof(unsigned);
    cq_len_ = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
    const bool single = params.features & IORING_FEAT_SINGLE_MMAP;
    if (single) sq_len_ = cq_len_ = std::max(sq_len_, cq_len_);
    sq_ = map(sq_len_, IORING_OFF_SQ_RING);
    cq_ = single ? sq_ : map(cq_len_, IORING_OFF_CQ_RING);
    sqes_len_ = params.sq_entries * sizeof(io_uring_sqe);
    sqes_ = static_cast<io_uring_sqe*>(map(sqes_len_, IORING_OFF_SQES));
    char* sq = static_cast<char*>(sq_);
    char* cq = static_cast<char*>(cq_);
    sq_tail_ = reinterpret_cast<unsigned*>(sq + params.sq_off.tail);
    sq_mask_ = *reinterpret_cast<unsigned*>(sq + params.sq_off.ring_mask);
    sq_array_ = reinterpret_cast<unsigned*>(sq + params.sq_off.array);
    cq_head_ = reinterpret_cast<unsigned*>(cq + params.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(cq + params.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(cq + params.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(cq + params.cq_off.cqes);
  }

  ~Ring() { release(); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  unsigned entries() const { return entries_; }

  // Queue a read; the ring is never fuller than entries() (the caller bounds what is in flight).
  void queue_read(int fd, char* buf, int64_t length, int64_t offset, uint64_t tag) {
    const unsigned tail = *sq_tail_;
    const unsigned slot = tail & sq_mask_;
    io_uring_sqe& sqe = sqes_[slot];
    std::memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = IORING_OP_READ;
    sqe.fd = fd;
    sqe.addr = reinterpret_cast<uint64_t>(buf);
    sqe.len = static_cast<uint32_t>(length);
    sqe.off = static_cast<uint64_t>(offset);
    sqe.user_data = tag;
    sq_array_[slot] = slot;
    __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
  }

  // Submit `to_submit` queued reads and wait for at least `wait` completions; returns how many
  // were submitted, or -errno.
  int enter(unsigned to_submit, unsigned wait) {
    const int got = io_uring_enter_call(fd_, to_submit, wait, wait ? IORING_ENTER_GETEVENTS : 0);
    return got < 0 ? -errno : got;
  }

  template <typename Handle>
  void reap(Handle handle) {
    unsigned head = *cq_head_;
    const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
    for (; head != tail; ++head) {
      const io_uring_cqe& cqe = cqes_[head & cq_mask_];
      handle(cqe.user_data, cqe.res);
    }
    __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
  }

 private:
  void* map(size_t length, off_t what) {
    void* address = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, what);
    if (address == MAP_FAILED) {
      const int code = errno;
      release();
      TORCH_CHECK(false, "read_rows: mapping the io_uring rings failed: ", strerror_text(code));
    }
    return address;
  }

  void release() {
    if (sqes_) munmap(sqes_, sqes_len_);
    if (cq_ && cq_ != sq_) munmap(cq_, cq_len_);
    if (sq_) munmap(sq_, sq_len_);
    if (fd_ >= 0) close(fd_);
    sqes_ = nullptr;
    cq_ = sq_ = nullptr;
    fd_ = -1;
  }

  int fd_ = -1;
  unsigned entries_ = 0;
  size_t sq_len_ = 0, cq_len_ = 0, sqes_len_ = 0;
  void *sq_ = nullptr, *cq_ = nullptr;
  io_uring_sqe* sqes_ = nullptr;
  unsigned *sq_tail_ = nullptr, *sq_array_ = nullptr, *cq_head_ = nullptr, *cq_tail_ = nullptr;
  unsigned sq_mask_ = 0, cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
};

std::unique_ptr<Ring>& thread_ring_slot() {
  thread_local std::unique_ptr<Ring> ring;
  return ring;
}

// The calling thread's ring, made on first use and remade larger when a deeper queue is asked.
Ring& thread_ring(int64_t depth) {
  std::unique_ptr<Ring>& ring = thread_ring_slot();
  if (!ring || ring->entries() < static_cast<unsigned>(depth)) {
    ring.reset();
    ring = std::make_unique<Ring>(static_cast<unsigned>(depth));
  }
  return *ring;
}

std::pair<int64_t, int64_t> read_with_io_uring(const Table& table, std::vector<Run>& runs,
                                               int64_t depth) {
  Ring& ring = thread_ring(depth);
  const int64_t limit = std::min<int64_t>(depth, ring.entries());
  std::vector<size_t> again;  // runs to read more of: partial or interrupted reads
  size_t next = 0;
  int64_t in_flight = 0, queued = 0, reads = 0, bytes = 0;
  int fatal = 0;
  auto queue = [&](size_t index) {
    Run& run = runs[index];
    ring.queue_read(table.fd, run.buf + run.done, run.length - run.done, run.file_start + run.done,
                    index);
    ++queued;
    ++reads;
  };
  while (true) {
    while (!fatal && in_flight + queued < limit && (!again.empty() || next < runs.size())) {
      if (!again.empty()) {
        queue(again.back());
        again.pop_back();
      } else {
        queue(next++);
      }
    }
    if (in_flight + queued == 0) break;
    const int submitted = ring.enter(static_cast<unsigned>(queued), 1);
    if (submitted == -EINTR || submitted == -EAGAIN || submitted == -EBUSY) {
      if (in_flight == 0 && submitted != -EINTR) std::this_thread::yield();
    } else if (submitted < 0) {
      // The ring itself failed: what is in flight still targets our buffers, so this thread's
      // ring is closed (the kernel cancels its requests) before they are freed.
      fatal = -submitted;
      break;
    } else {
      queued -= submitted;
      in_flight += submitted;
    }
    ring.reap([&](uint64_t tag, int32_t result) {
      --in_flight;
      Run& run = runs[tag];
      if (result > 0) bytes += result;
      if (account(table, run, result)) again.push_back(tag);
    });
  }
  if (fatal) {
    if (in_flight > 0) thread_ring_slot().reset();
    TORCH_CHECK(false, "read_rows: io_uring_enter failed: ", strerror_text(fatal), " (errno ",
                fatal, ")");
  }
  return {reads, bytes};
}

// ---- the op -------------------------------------------------------------------------------

template <typename index_t>
void sort_ids(const at::Tensor& ids, int64_t num_rows, Table& table) {
  const index_t* data = ids.data_ptr<index_t>();
  const int64_t n = ids.numel();
  table.sorted.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = data[i];
    TORCH_CHECK_INDEX(id >= 0 && id < num_rows, "read_rows: id ", id, " at position ", i,
                      " is out of range for a table of ", num_rows, " rows");
    table.sorted[i] = {id, i};
  }
  std::sort(table.sorted.begin(), table.sorted.end());
}

// Split the sorted ids into runs: rows whose reads touch (adjacent rows; under O_DIRECT, rows
// in the same or the next aligned block) are one read, up to kMaxRunBytes.
std::vector<Run> plan_runs(const Table& table, int64_t align) {
  const int64_t block = std::max<int64_t>(align, 1);
  auto down = [&](int64_t x) { return x / block * block; };
  auto up = [&](int64_t x) { return (x + block - 1) / block * block; };
  std::vector<Run> runs;
  const auto& sorted = table.sorted;
  for (size_t k = 0; k < sorted.size();) {
    const int64_t first = table.offset + sorted[k].first * table.row_bytes;
    int64_t end = first + table.row_bytes;
    size_t j = k + 1;
    for (; j < sorted.size(); ++j) {
      const int64_t start = table.offset + sorted[j].first * table.row_bytes;
      const bool touches = align > 0 ? down(start) <= up(end) : start <= end;
      if (!touches || start + table.row_bytes - down(first) > kMaxRunBytes) break;
      end = std::max(end, start + table.row_bytes);
    }
    Run run;
    run.begin = k;
    run.end = j;
    run.file_start = down(first);
    run.length = up(end) - run.file_start;
    run.needed = end - run.file_start;
    runs.push_back(run);
    k = j;
  }
  return runs;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

std::vector<int64_t> read_rows_cpu(int64_t fd, const at::Tensor& ids, at::Tensor& out,
                                   int64_t offset, int64_t row_bytes, int64_t num_rows,
                                   c10::string_view engine, int64_t queue_depth, int64_t align) {
  TORCH_CHECK(fd >= 0, "read_rows: 'fd' must be an open descriptor (got ", fd, ")");
  TORCH_CHECK(offset >= 0 && row_bytes > 0 && num_rows >= 0,
              "read_rows: need offset >= 0, row_bytes > 0, num_rows >= 0 (got ", offset, ", ",
              row_bytes, ", ", num_rows, ")");
  TORCH_CHECK(engine == "io_uring" || engine == "pread",
              "read_rows: 'engine' must be 'io_uring' or 'pread' (got '", std::string(engine), "')");
  TORCH_CHECK(queue_depth >= 1 && queue_depth <= kMaxQueueDepth,
              "read_rows: 'queue_depth' must be in [1, ", kMaxQueueDepth, "] (got ", queue_depth, ")");
  TORCH_CHECK(align == 0 || (align > 0 && align <= (1 << 20) && (align & (align - 1)) == 0),
              "read_rows: 'align' must be 0 or a power of two up to 1 MiB (got ", align, ")");
  TORCH_CHECK(ids.device().is_cpu() && ids.dim() == 1 && ids.is_contiguous() &&
                  (ids.scalar_type() == at::kInt || ids.scalar_type() == at::kLong),
              "read_rows: 'ids' must be a contiguous 1-D int32 or int64 CPU tensor");
  TORCH_CHECK(out.device().is_cpu() && out.is_contiguous() &&
                  out.numel() * static_cast<int64_t>(out.element_size()) == ids.numel() * row_bytes,
              "read_rows: 'out' must be a contiguous CPU tensor of ", ids.numel() * row_bytes,
              " bytes (got ", out.numel() * static_cast<int64_t>(out.element_size()), ")");
  Table table{static_cast<int>(fd), offset, row_bytes, {}};
  if (ids.scalar_type() == at::kInt) {
    sort_ids<int32_t>(ids, num_rows, table);
  } else {
    sort_ids<int64_t>(ids, num_rows, table);
  }
  std::vector<Run> runs = plan_runs(table, align);
  char* out_bytes = static_cast<char*>(out.data_ptr());
  // Buffered, a run whose rows are distinct and land in consecutive rows of out is read in
  // place; every other run goes through the scratch buffer.
  int64_t scratch_bytes = 0;
  for (Run& run : runs) {
    if (align == 0) {
      bool in_place = true;
      for (size_t k = run.begin + 1; k < run.end && in_place; ++k) {
        in_place = table.sorted[k].first == table.sorted[k - 1].first + 1 &&
                   table.sorted[k].second == table.sorted[k - 1].second + 1;
      }
      if (in_place) {
        run.bounced = false;
        run.buf = out_bytes + table.sorted[run.begin].second * row_bytes;
        continue;
      }
    }
    scratch_bytes += run.length;
  }
  const int64_t memory_align = std::max<int64_t>(align, 64);
  std::unique_ptr<char, FreeDeleter> scratch;
  if (scratch_bytes > 0) {
    void* memory = nullptr;
    const size_t size = (scratch_bytes + memory_align - 1) / memory_align * memory_align;
    TORCH_CHECK(posix_memalign(&memory, memory_align, size) == 0,
                "read_rows: could not allocate a ", scratch_bytes, "-byte read buffer");
    scratch.reset(static_cast<char*>(memory));
    char* cursor = scratch.get();
    for (Run& run : runs) {
      if (run.bounced) {
        run.buf = cursor;
        cursor += run.length;  // run lengths are multiples of align under O_DIRECT
      }
    }
  }
  const auto counts = engine == "io_uring" ? read_with_io_uring(table, runs, queue_depth)
                                           : read_with_pread(table, runs, queue_depth);
  for (const Run& run : runs) TORCH_CHECK(run.error.empty(), run.error);
  for (const Run& run : runs) {
    if (!run.bounced) continue;
    for (size_t k = run.begin; k < run.end; ++k) {
      const auto [id, position] = table.sorted[k];
      std::memcpy(out_bytes + position * row_bytes,
                  run.buf + (offset + id * row_bytes - run.file_start), row_bytes);
    }
  }
  return {counts.first, counts.second, static_cast<int64_t>(runs.size())};
}

std::string io_uring_probe() {
  try {
    thread_ring(1);
  } catch (const c10::Error& error) {
    return error.what_without_backtrace();
  }
  return "";
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) { m.impl("read_rows", &read_rows_cpu); }
// io_uring_probe takes no tensor: one implementation for every dispatch key.
TORCH_LIBRARY_IMPL(graphengine, CompositeImplicitAutograd, m) {
  m.impl("io_uring_probe", &io_uring_probe);
}

}  // namespace graphengine
