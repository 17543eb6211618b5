"""Reference solution of exercise 06 (C++ reduction accumulators' start values)."""
TARGET = "miniinductor.codegen.cpp.reduction_init"


def reduction_init(reduction_type, ctype):
    floating = ctype in ("float", "double")
    if reduction_type in ("max", "argmax"):
        return f"-std::numeric_limits<{ctype}>::infinity()" if floating else f"std::numeric_limits<{ctype}>::lowest()"
    if reduction_type in ("min", "argmin"):
        return f"std::numeric_limits<{ctype}>::infinity()" if floating else f"std::numeric_limits<{ctype}>::max()"
    return {"sum": "0", "prod": "1", "any": "false"}[reduction_type]
