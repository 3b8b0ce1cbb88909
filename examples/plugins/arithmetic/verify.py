from typing import Any, Mapping

def score_arithmetic(task: Mapping[str, Any], trajectory: Any) -> float:
    expected = str(task.get("reference", "")).strip()
    answer = str(trajectory).strip().split()[-1] if trajectory else ""
    return 1.0 if answer == expected else 0.0
