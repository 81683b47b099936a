"""Scheduler probing: is a Dask scheduler answering at an address, within a bounded time.

distributed bounds the TCP connection by its timeout but then waits without a limit for the
peer's handshake, so a web server or a silent port would hang a Client forever.
:func:`probe_scheduler` runs the whole exchange (connection, handshake, identity reply) under one
deadline and tells a refused connection, a silent host, a port that accepts connections but
speaks no Dask, and a peer closing the handshake apart, in one line naming the address
(:class:`ppa_dask.cluster.ClusterConnectError`). :func:`connected_client` probes first, then
opens a Client whose later connections are bounded by the same timeout.
"""

from __future__ import annotations

import contextlib

from ppa_dask.cluster.errors import ClusterConnectError
from ppa_dask.cluster.files import DEFAULT_CONNECT_TIMEOUT, check_seconds

__all__ = ["probe_scheduler", "connected_client"]


def _refused(exc):
    """Whether a connection failure was the peer refusing it (nothing listening)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


async def _scheduler_identity(address, timeout, connection_args, phase):
    """Connect to ``address`` and ask for its identity (distributed's ``identity`` op);
    ``phase["listening"]`` is set once a plain TCP connection to the port succeeded."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        # a bare TCP connection first tells "nothing listening" from "not speaking Dask"
        host, port = parse_host_port(location)
        _, writer = await asyncio.open_connection(host, port)
        writer.close()
        phase["listening"] = True
    comm = await connect(address, timeout=timeout, **connection_args)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def probe_scheduler(address, timeout=DEFAULT_CONNECT_TIMEOUT, security=None):
    """Check within ``timeout`` seconds that a Dask scheduler answers at ``address``.

    distributed bounds the TCP connection by its timeout but then waits without a limit for
    the peer's handshake, so a web server or a silent port would hang a Client forever. The
    whole exchange (connection, handshake, identity reply) runs here under one deadline, in a
    thread of its own (callable whether or not an event loop runs in this one).

    Returns
    -------
    identity : dict
        The scheduler's identity (``type``, ``id``, ``address``, ...).

    Raises
    ------
    ClusterConnectError
        One line naming ``address``: refused, timed out, or not a Dask scheduler.

    Examples
    --------
    >>> try:
    ...     probe_scheduler("tcp://127.0.0.1:1", timeout=1)
    ... except ClusterConnectError as exc:
    ...     print("refused" in str(exc))
    True
    """
    import asyncio
    import concurrent.futures

    from distributed.comm.core import CommClosedError
    from distributed.security import Security

    timeout = check_seconds("connect_timeout", timeout)
    args = (security or Security()).get_connection_args("client")

    phase = {"listening": False}

    async def bounded():
        return await asyncio.wait_for(_scheduler_identity(address, timeout, args, phase), timeout)

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ppa-dask-probe") as pool:
        future = pool.submit(asyncio.run, bounded())
        try:
            identity = future.result()
        except TimeoutError:
            raise ClusterConnectError(
                f"scheduler {address}: timed out after {timeout:g} s: "
                + (
                    "the port accepts connections but no Dask scheduler answered (not a Dask "
                    "scheduler?)"
                    if phase["listening"]
                    else "no connection (host down or filtered?); raise --connect-timeout for "
                    "a slow network"
                )
            ) from None
        except CommClosedError:
            raise ClusterConnectError(
                f"scheduler {address}: the peer closed the connection during Dask's "
                "handshake: not a Dask scheduler"
            ) from None
        except OSError as exc:
            what = (
                "connection refused (nothing listening there)"
                if _refused(exc)
                else f"cannot connect ({' '.join(str(exc).split())})"
            )
            raise ClusterConnectError(f"scheduler {address}: {what}") from None
        except Exception as exc:  # garbage instead of Dask's messages
            raise ClusterConnectError(
                f"scheduler {address}: not a Dask scheduler (its reply is not Dask's protocol: "
                f"{type(exc).__name__})"
            ) from None
    if not isinstance(identity, dict) or identity.get("type") != "Scheduler":
        kind = identity.get("type") if isinstance(identity, dict) else type(identity).__name__
        raise ClusterConnectError(
            f"scheduler {address}: not a Dask scheduler (it identifies as {kind!r})"
        )
    return identity


@contextlib.contextmanager
def connected_client(address, security, timeout):
    """A Client of the scheduler at ``address``, probed first; every later connection of the
    Client is bounded by ``timeout`` too (distributed's ``comm.timeouts.connect``)."""
    import dask
    from distributed import Client

    probe_scheduler(address, timeout, security)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
        try:
            client = Client(address, security=security, timeout=timeout, set_as_default=True)
        except OSError as exc:  # the scheduler went away between the probe and now
            raise ClusterConnectError(
                f"scheduler {address}: {' '.join(str(exc).split())}"
            ) from None
        with client:
            yield client
