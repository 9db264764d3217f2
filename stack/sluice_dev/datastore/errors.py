"""The one failure type of the server: a gRPC status code and a message, as the
real service answers them, raised anywhere and turned into a status by the service."""

from __future__ import annotations

import grpc


class ApiError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, message)


def unsupported(feature: str) -> ApiError:
    """A valid request this server does not implement: refused by name, never
    answered wrongly."""
    return ApiError(
        grpc.StatusCode.UNIMPLEMENTED, f"{feature} is not supported by the sluice-dev server"
    )
