"""A real TCP proxy on loopback in front of a service (moto, Distribution): it passes bytes
through as they come, counts those the client sends (`sent_up`: what reached the server
through it, request bodies included) and those it answers (`sent_down`), and can drop one connection mid-response.

The first connection whose response bytes pass cut_after is closed on both sides (a
dropped connection, as a load balancer or a flaky network does); later ones pass through.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target: str, cut_after: int | None = None) -> None:
        host, _, port = target.removeprefix("http://").partition(":")
        self.target = (host, int(port))
        self.cut_after = cut_after
        self.cuts = 0
        self.sent_up = 0
        self.sent_down = 0
        self._lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.endpoint = f"http://{self.host}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, downstream: bool) -> None:
        sent = 0
        try:
            while data := src.recv(1024 * 1024):
                dst.sendall(data)
                sent += len(data)
                with self._lock:
                    if downstream:
                        self.sent_down += len(data)
                    else:
                        self.sent_up += len(data)
                if downstream and self.cut_after is not None and sent > self.cut_after:
                    with self._lock:
                        cut = self.cuts == 0
                        self.cuts += cut
                    if cut:
                        break
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.server.close()
