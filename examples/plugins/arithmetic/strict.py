from typing import Any, Mapping

from verify import score_arithmetic


def score(task: Mapping[str, Any], trajectory: Any) -> float:
    # The seed's rule: a task that cannot be scored raises; it never returns 0.0.
    if not task.get("reference"):
        raise ValueError("this task has no reference; it cannot be scored")
    return score_arithmetic(task, trajectory)
