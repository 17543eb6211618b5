"""Reference solution of exercise 04 (fusion legality: fused_shape)."""
TARGET = "miniinductor.scheduler.fusion.fused_shape"


def fused_shape(a, b):
    if a.is_reduction and b.is_reduction:
        if (a.R, a.Q) == (b.R, b.Q):
            return a.R, a.Q
        return f"reduction ranges differ: {a.R}x{a.Q} vs {b.R}x{b.Q}"
    if a.is_reduction or b.is_reduction:
        red, point = (a, b) if a.is_reduction else (b, a)
        if point.R in (red.R + red.Q, red.R):
            return red.R, red.Q
        return f"ranges differ: {point.R} vs reduction {red.R}x{red.Q}"
    if a.R == b.R:
        return a.R, []
    return f"ranges differ: {a.R} vs {b.R}"
