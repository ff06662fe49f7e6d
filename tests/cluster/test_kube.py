"""extender/cluster/kube.py: what the API server's answers become for the extender."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.api import ClusterAPIError
from extender.cluster.kube import api_object

MANAGED = [{"manager": "dra-extender", "operation": "Update", "fieldsV1": {"f:status": {}}}]

#: name -> (an answer, the object the extender keeps of it).
ANSWERS: dict[str, tuple[Any, dict[str, Any]]] = {
    "managedFields left out": (
        {"kind": "ResourceClaim", "metadata": {"name": "c", "managedFields": MANAGED}, "spec": {}},
        {"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}},
    ),
    "nothing to leave out": ({"metadata": {"name": "c"}}, {"metadata": {"name": "c"}}),
}


@pytest.mark.parametrize("case", list(ANSWERS))
def test_answers_are_kept_without_the_servers_managed_fields(case: str) -> None:
    answer, kept = ANSWERS[case]
    assert api_object(answer, "PUT claim") == kept


@pytest.mark.parametrize("answer", [None, [], {"kind": "Status"}, {"metadata": "x"}])
def test_an_answer_that_is_no_object_is_an_error(answer: Any) -> None:
    with pytest.raises(ClusterAPIError, match="PUT claim: malformed answer"):
        api_object(answer, "PUT claim")
