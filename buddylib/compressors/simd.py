"""Vector kernels numba does not write by itself, as LLVM IR (numba ``intrinsic``): the pieces of EBO's size
path and decoder that run on 32 or 8 values at once (issue 42).

Why: numba widens every small integer to 64 bits before arithmetic, so a loop over 16-bit words runs in 64-bit
lanes (8 a vector register) and its sums of comparisons reduce lane by lane; and LLVM does not vectorise a read
at a computed bit offset (a gather) on the CPUs we have. Written in IR, the exponent statistics of 32 words are
a few vector instructions in 16- or 8-bit lanes whose comparisons are counted by a population count of their
mask, and 8 values at a fixed bit stride are one funnel shift per lane from three 64-bit words of the code.

The IR names no instruction set: LLVM lowers it for whatever CPU numba compiles for (AVX-512, AVX2, SSE2,
other targets), so every result is the same integer on any machine; only the speed differs (``make bench``).

Nothing here checks a bound: the callers (:mod:`~buddylib.compressors.ebo`) guarantee that every byte read lies
inside the array (a code's reads stay within :data:`~buddylib.compressors.ebo.MARGIN` bytes of its start).
numba caches the kernels that call these in the callers' files: after editing this module, clear
``__pycache__`` (numba keys its cache by the caller's source file, not by what it imports).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
#: The values one call of ``exponent_stats`` and ``offset_counts`` reads, and of ``block8``.
LANES = 32
STRIDE_LANES = 8
#: The offset limits the size path counts: ``d >= 2^k - 1`` for k = 1..7.
LIMITS = (1, 3, 7, 15, 31, 63, 127)


def _splat(builder: ir.IRBuilder, value: ir.Value, vt: ir.VectorType) -> ir.Value:
    undef = ir.Constant(vt, ir.Undefined)
    one = builder.insert_element(undef, value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, vt.count), [0] * vt.count))


def _fn(builder: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def _ints(context, builder, sig, args) -> list:
    """Every scalar argument as an i64 (arrays as they are)."""
    return [a if isinstance(t, types.Array) else context.cast(builder, a, t, types.int64)
            for a, t in zip(args, sig.args, strict=True)]


def _c_array(t, ndim: int, dtypes: tuple) -> bool:
    return isinstance(t, types.Array) and t.ndim == ndim and t.layout == "C" and t.dtype in dtypes


def _row_vector(context, builder, aryty, ary_value, row, col):
    """The LANES words of a C-contiguous 2-D array from (row, col) on, as one vector, and its element type."""
    bits = aryty.dtype.bitwidth
    vt = ir.VectorType(ir.IntType(bits), LANES)
    ary = context.make_array(aryty)(context, builder, ary_value)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [row, col])
    return builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1), vt


def _exponents(builder, v, vt, e_bits, m_bits):
    it = vt.element
    e_ = builder.trunc(e_bits, it)
    emask = builder.sub(builder.shl(ir.Constant(it, 1), e_), ir.Constant(it, 1))
    return builder.and_(builder.lshr(v, _splat(builder, builder.trunc(m_bits, it), vt)), _splat(builder, emask, vt))


def _popcount(builder, mask) -> ir.Value:
    wide = ir.IntType(LANES)
    return builder.zext(builder.call(_fn(builder, f"llvm.ctpop.i{LANES}", wide, [wide]), [builder.bitcast(mask, wide)]),
                        I64)


@intrinsic
def exponent_stats(typingctx, words, row, col, e_bits, m_bits):
    """``(b, zeros)`` of the 32 words ``words[row, col:col + 32]`` (uint16 or uint8, C-contiguous): the largest
    exponent field of the nonzero words (0 if none) and the count of zero words."""
    if not _c_array(words, 2, (types.uint16, types.uint8)):
        return None
    sig = types.UniTuple(types.int64, 2)(words, row, col, e_bits, m_bits)

    def codegen(context, builder, sig, args):
        _, row, col, e_bits, m_bits = _ints(context, builder, sig, args)
        v, vt = _row_vector(context, builder, sig.args[0], args[0], row, col)
        nz = builder.icmp_unsigned("!=", v, ir.Constant(vt, None))
        ex = _exponents(builder, v, vt, e_bits, m_bits)  # a zero word's is 0
        b = builder.call(_fn(builder, f"llvm.vector.reduce.umax.v{LANES}i{vt.element.width}", vt.element, [vt]), [ex])
        zeros = builder.sub(ir.Constant(I64, LANES), _popcount(builder, nz))
        return context.make_tuple(builder, sig.return_type, [builder.zext(b, I64), zeros])
    return sig, codegen


@intrinsic
def offset_counts(typingctx, words, row, col, e_bits, m_bits, b):
    """How many of the 32 words ``words[row, col:col + 32]`` have an exponent offset ``d >= 2^k - 1``, for k =
    1..7 (:data:`LIMITS`): ``d = b - e`` of a nonzero word; a zero word is not counted."""
    if not _c_array(words, 2, (types.uint16, types.uint8)):
        return None
    sig = types.UniTuple(types.int64, len(LIMITS))(words, row, col, e_bits, m_bits, b)

    def codegen(context, builder, sig, args):
        _, row, col, e_bits, m_bits, b = _ints(context, builder, sig, args)
        v, vt = _row_vector(context, builder, sig.args[0], args[0], row, col)
        nz = builder.icmp_unsigned("!=", v, ir.Constant(vt, None))
        d = builder.sub(_splat(builder, builder.trunc(b, vt.element), vt), _exponents(builder, v, vt, e_bits, m_bits))
        d = builder.select(nz, d, ir.Constant(vt, None))
        counts = [_popcount(builder, builder.icmp_unsigned(">=", d, ir.Constant(vt, [c] * LANES))) for c in LIMITS]
        return context.make_tuple(builder, sig.return_type, counts)
    return sig, codegen


@intrinsic
def be64(typingctx, address):
    """The 8 bytes at ``address`` (any alignment) as a big-endian uint64."""
    sig = types.uint64(address)

    def codegen(context, builder, sig, args):
        p = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64), I64.as_pointer())
        return builder.call(_fn(builder, "llvm.bswap.i64", I64, [I64]), [builder.load(p, align=1)])
    return sig, codegen


@intrinsic
def cttz(typingctx, x):
    """The index of the lowest set bit of a nonzero uint64."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.call(_fn(builder, "llvm.cttz.i64", I64, [I64, I1]), [args[0], ir.Constant(I1, 0)])
    return sig, codegen


@intrinsic
def block8(typingctx, address, s0, w, k, m_bits, b, s_shift, tmp, j):
    """EBO's values with no escape, 8 at once: value t's ``w = 1 + k + M`` bits start at bit ``s0 + t w`` (s0 <
    8) of the bytes at ``address``, as sign, offset ``d`` (k bits) and mantissa; ``(sign << s_shift) | ((b - d)
    << M) | mantissa`` goes to ``tmp[j + t]`` (uint16). Returns the mask of the values that are not that (bit t:
    ``d`` is the escape ``max(2^k - 1, 1)`` or ``b - d < 0``). Reads the 24 bytes from ``address``: w <= 18."""
    if not _c_array(tmp, 1, (types.uint16,)):
        return None
    sig = types.uint64(address, s0, w, k, m_bits, b, s_shift, tmp, j)

    def codegen(context, builder, sig, args):
        address, s0, w, k, m_bits, b, s_shift, _, j = _ints(context, builder, sig, args)
        vt = ir.VectorType(I64, STRIDE_LANES)

        def sp(x):
            return _splat(builder, x, vt)

        def const(x):
            return ir.Constant(vt, [x] * STRIDE_LANES)
        bswap = _fn(builder, "llvm.bswap.i64", I64, [I64])
        words = []
        for q in range(3):  # the 192 bits from the block's first byte on: 8 values of up to 18 bits and s0 < 8
            p = builder.inttoptr(builder.add(address, ir.Constant(I64, 8 * q)), I64.as_pointer())
            words.append(sp(builder.call(bswap, [builder.load(p, align=1)])))
        s = builder.add(sp(s0), builder.mul(ir.Constant(vt, list(range(STRIDE_LANES))), sp(w)))
        q = builder.lshr(s, const(6))
        q0 = builder.icmp_unsigned("==", q, const(0))
        q1 = builder.icmp_unsigned("==", q, const(1))
        hi = builder.select(q0, words[0], builder.select(q1, words[1], words[2]))
        lo = builder.select(q0, words[1], words[2])  # a value in the third word ends in it (s < 7 + 7 * 18)
        x = builder.call(_fn(builder, "llvm.fshl.v8i64", vt, [vt, vt, vt]), [hi, lo, builder.and_(s, const(63))])
        one = ir.Constant(I64, 1)
        kmask = builder.sub(builder.shl(one, k), one)
        lim = builder.select(builder.icmp_signed("==", k, ir.Constant(I64, 0)), one, kmask)
        head = builder.lshr(x, sp(builder.sub(ir.Constant(I64, 63), k)))  # sign and offset
        d = builder.and_(head, sp(kmask))
        ex = builder.sub(sp(b), d)
        mant = builder.and_(builder.lshr(x, sp(builder.sub(builder.sub(ir.Constant(I64, 63), k), m_bits))),
                            sp(builder.sub(builder.shl(one, m_bits), one)))
        value = builder.or_(builder.or_(builder.shl(builder.lshr(head, sp(k)), sp(s_shift)),
                                        builder.shl(ex, sp(m_bits))), mant)
        stop = builder.or_(builder.icmp_unsigned("==", d, sp(lim)), builder.icmp_signed("<", ex, const(0)))
        out = context.make_array(sig.args[7])(context, builder, args[7])
        v16 = ir.VectorType(ir.IntType(16), STRIDE_LANES)
        builder.store(builder.trunc(value, v16), builder.bitcast(builder.gep(out.data, [j]), v16.as_pointer()),
                      align=1)
        return builder.zext(builder.bitcast(stop, ir.IntType(STRIDE_LANES)), I64)
    return sig, codegen
