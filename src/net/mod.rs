//! The socket2 UDP driver: the only code in rungs that does network I/O.
