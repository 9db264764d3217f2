"""Running the server: the gRPC service on one port, the control switches on another."""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Final

import grpc

from sluice_dev import ports
from sluice_dev.datastore import control
from sluice_dev.datastore.faults import Faults, Stats
from sluice_dev.datastore.service import Datastore
from sluice_dev.datastore.store import Store

MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024


@dataclass
class Running:
    service: Datastore
    grpc_server: grpc.Server
    control_server: ThreadingHTTPServer

    def stop(self, grace: float = 2.0) -> None:
        self.control_server.shutdown()
        self.grpc_server.stop(grace).wait()


def start(
    port: int = ports.DATASTORE,
    control_port: int = ports.DATASTORE_CONTROL,
    *,
    host: str = ports.HOST,
    workers: int = 16,
) -> Running:
    service = Datastore(Store(), Faults(), Stats())
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="datastore"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    server.add_generic_rpc_handlers((service.handler(),))
    address = f"{host}:{port}"
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    try:
        control_server = control.serve(service, control_port, host)
    except OSError:
        server.stop(0)
        raise
    return Running(service, server, control_server)
