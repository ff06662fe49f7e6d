"""JSON answers in kube-scheduler's shape, shared by the verbs and the debug views."""

from __future__ import annotations

from fastapi.responses import Response

from extender.service import wire

JSON = "application/json"


def json_response(payload: bytes, status: int = 200) -> Response:
    return Response(content=payload, status_code=status, media_type=JSON)


def error_response(message: str, status: int = 400) -> Response:
    """``{"Error": message}``, as kube-scheduler's extender client reads errors."""
    return json_response(wire.encode({"Error": message}), status)
