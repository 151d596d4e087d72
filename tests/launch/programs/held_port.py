# Whether MASTER_PORT can be bound now: without SO_REUSEADDR (any program) and with it, listening (as torch's
# TCPStore binds). Prints "MASTER_PORT plain: bound|refused, store: listens|refused". launch_program_test.cpp.
# Every interface, as the launcher holds it (bind_every_interface): IPv6 dual-stack, else IPv4 alone (a host
# without IPv6 sockets or addresses).
import errno
import os
import socket


def bind(reuse):
    port = int(os.environ["MASTER_PORT"])
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            s = socket.socket(family)
        except OSError:
            continue
        try:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            if reuse:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, port))
            if reuse:
                s.listen()
            return "listens" if reuse else "bound"
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return "refused"
        finally:
            s.close()
    return "refused"


print("MASTER_PORT plain: %s, store: %s" % (bind(False), bind(True)), flush=True)
