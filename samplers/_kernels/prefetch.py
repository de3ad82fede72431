"""A software prefetch for Numba kernels (LLVM's ``llvm.prefetch``).

Random reads of a large graph are latency-bound; issuing the read of the row needed
a few iterations ahead lets several misses overlap (the kernels read 16 nodes ahead, the
distance that gave the fastest neighbor reads; the measurements are in
docs/benchmarks-archive.md, issue 3).
"""

from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

_READ = 0
_KEEP_IN_ALL_CACHES = 3
_DATA_CACHE = 1


@intrinsic
def _llvm_prefetch(typingctx, array, index):
    """Hint the CPU to load ``array[index]`` into cache; never faults, returns nothing."""
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, view, [args[1]], wraparound=False, boundscheck=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0",
        )
        builder.call(
            function,
            [
                builder.bitcast(pointer, byte_pointer),
                ir.Constant(i32, _READ),
                ir.Constant(i32, _KEEP_IN_ALL_CACHES),
                ir.Constant(i32, _DATA_CACHE),
            ],
        )
        return context.get_dummy_value()

    return signature, codegen


def _no_prefetch(array, index):
    """What a hint to the cache comes to where the kernels run as Python."""


# Under Numba's debugging switch (NUMBA_DISABLE_JIT=1) the kernels run as plain Python, where
# an intrinsic cannot be called.
prefetch = _no_prefetch if config.DISABLE_JIT else _llvm_prefetch
