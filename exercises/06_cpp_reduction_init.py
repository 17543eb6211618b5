"""C++ codegen of a reduction: the value each accumulator starts from.

Phase: codegen (C++). Mirrors `reduction_init` in `torch/_inductor/codegen/cpp.py`.

A C++ reduction kernel declares an accumulator before the loop over the reduced range,
folds every value into it, and stores it after the loop:

    float acc0 = <init>;                 // <- your function writes this text
    for (int64_t r0 = 0; r0 < 64; r0++) {
        auto tmp0 = in_ptr0[64*i0 + r0];
        acc0 = std::max<float>(acc0, tmp0); ...
    }
    out_ptr0[i0] = acc0;

The start value must be the identity of the combine: combining it with any x gives x.
`reduction_init(reduction_type, ctype)` returns that value as C++ source text, for
`reduction_type` in sum, prod, any, max, min, argmax, argmin (argmax/argmin start their
value accumulator like max/min) and `ctype` a C++ type name: "float", "double", "int64_t",
"int32_t", "bool", ...
Worked examples: ("sum", "float") → "0"; ("max", "float") → "-std::numeric_limits<float>::infinity()";
("max", "int64_t") → "std::numeric_limits<int64_t>::lowest()" (integers have no infinity).

The stub below starts every accumulator at 0: right for sums, wrong for a max of
negative numbers, a product, a min of positive numbers.
Hints: `std::numeric_limits<T>::infinity()`, `::lowest()`, `::max()`; "false" for any.
Run: python -m miniinductor exercise run 6
"""
TARGET = "miniinductor.codegen.cpp.reduction_init"


def reduction_init(reduction_type, ctype):
    return "0"
