"""The graded exercises (exercises/, miniinductor/tools/exercises.py): every reference solution
passes its checks and every stub fails them (`check-all`, as CI runs it); the swap always
puts the real function back; the CLI lists them; a wrong rule is explained in words."""
from __future__ import annotations

import pytest

from miniinductor.tools import exercises
from miniinductor.tools.cli import main
from miniinductor.tools.exercises import Failure, check_all, load, swap


def test_check_all(capsys):
    ok = check_all()
    out = capsys.readouterr().out
    assert ok, out
    assert len(exercises.exercise_files()) >= 8
    assert out.count("solution passes; stub fails") == len(exercises.exercise_files())


def test_swap_restores_the_real_function_after_an_error():
    import miniinductor.lowering.pointwise as pointwise
    import miniinductor.scheduler.scheduler as scheduler
    from miniinductor.codegen.memory_planning import MemoryPlan
    from miniinductor.lowering.registry import aten, lowerings
    from miniinductor.scheduler import fusion
    real_where, real_score, real_key = pointwise.where, fusion.shared_bytes, MemoryPlan._key
    stub = lambda *a: None  # noqa: E731
    with pytest.raises(RuntimeError):
        with swap("miniinductor.lowering.pointwise.where", stub), \
                swap("miniinductor.scheduler.fusion.shared_bytes", stub), \
                swap("miniinductor.codegen.memory_planning.MemoryPlan._key", stub):
            assert pointwise.where is stub and lowerings[aten.where] is stub
            assert scheduler.shared_bytes is stub        # the `from .fusion import` copy too
            assert MemoryPlan._key is stub
            raise RuntimeError("boom")
    assert pointwise.where is real_where and lowerings[aten.where] is real_where
    assert fusion.shared_bytes is real_score and scheduler.shared_bytes is real_score
    assert MemoryPlan._key is real_key


def test_an_over_eager_fusion_rule_is_explained_in_words():
    checks = load(exercises.ROOT / "checks.py")

    def always(a, b):   # fuse anything with a reduction into the reduction's loops
        red = a if a.is_reduction else b
        return red.R, red.Q
    from miniinductor.passes import FUSION_RULES
    kept = list(FUSION_RULES)   # without ext/cost_model, which would refuse the transposed pair on its own
    FUSION_RULES[:] = [rule for rule in FUSION_RULES if rule[0] != "cost_model"]
    try:
        with swap("miniinductor.scheduler.fusion.fused_shape", always):
            with pytest.raises(Failure, match="a reduction with a pointwise node over a different range"):
                checks.fusion_legality()
    finally:
        FUSION_RULES[:] = kept


def test_cli_list_and_unknown_number(capsys):
    assert main(["exercise", "list"]) == 0
    out = capsys.readouterr().out
    for path in exercises.exercise_files():
        assert path.name[:2] in out and load(path).TARGET in out
    assert main(["exercise", "run", "99"]) == 2
    assert "no exercise 99" in capsys.readouterr().err


def test_cli_run_exit_codes():
    assert main(["exercise", "run", "6", "--solution"]) == 0
    assert main(["exercise", "run", "6"]) == 1      # the stub starts every accumulator at 0


def test_every_exercise_is_documented():
    page = (exercises.ROOT.parent / "docs" / "exercises.md").read_text()
    for path in exercises.exercise_files():
        assert f"| {path.name[:2]} |" in page, f"docs/exercises.md has no row for {path.name}"
        assert (exercises.ROOT / "solutions" / path.name).is_file(), f"{path.name} has no reference solution"


def test_exercise_6_failure_names_the_input_it_checked():
    """A rule right for floats but wrong for integers fails on the int64 input n, and the
    message describes n (randint), not x (randn - 3)."""
    checks = load(exercises.ROOT / "checks.py")
    solution = load(exercises.ROOT / "solutions" / "06_cpp_reduction_init.py").reduction_init

    def floats_only(reduction_type, ctype):   # every integer accumulator starts at 0
        return solution(reduction_type, ctype) if ctype in ("float", "double") else "0"
    with swap("miniinductor.codegen.cpp.reduction_init", floats_only):
        with pytest.raises(Failure) as info:
            checks.cpp_reduction_init()
    message = str(info.value)
    assert message.startswith("n.amin(-1) for n ~ randint(1, 100, (8, 32)), int64:"), message
    assert "randn" not in message, message
