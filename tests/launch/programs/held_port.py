# Whether MASTER_PORT can be bound now: without SO_REUSEADDR (any program) and with it, listening (as torch's
# TCPStore binds). Prints "MASTER_PORT plain: bound|refused, store: listens|refused". launch_program_test.cpp.
import os
import socket


def bind(reuse):
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    if reuse:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("::", int(os.environ["MASTER_PORT"])))
        if reuse:
            s.listen()
        return "listens" if reuse else "bound"
    except OSError:
        return "refused"
    finally:
        s.close()


print("MASTER_PORT plain: %s, store: %s" % (bind(False), bind(True)), flush=True)
