"""Reference solution of exercise 01 (decomposition of foreach ops)."""
TARGET = "miniinductor.ext.combo.decompositions._foreach_decomposition"


def _foreach_decomposition(per_element):
    def decompose(*args, **kwargs):
        n = len(next(a for a in args if isinstance(a, (list, tuple))))
        return [per_element(*[a[i] if isinstance(a, (list, tuple)) else a for a in args], **kwargs)
                for i in range(n)]
    return decompose
