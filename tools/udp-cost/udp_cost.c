/*
 * What the kernel charges for a loopback UDP datagram on this machine, sent
 * and received, in CPU microseconds: the floor under any relay that sends
 * one datagram per seat per tick (docs/experiments.md, "What one relay core
 * holds"). Linux only (sendmmsg, recvmmsg).
 *
 *   udp_cost [DATAGRAMS]      default 2,000,000
 *
 * A sender sends 120-byte datagrams in sendmmsg batches of 64, round-robin
 * to 8 sockets (a match's seats); a forked reader drains them with recvmmsg.
 * Each prints its own CPU time (user + system) per datagram. On loopback the
 * sender's system call also delivers the datagram into the receiving
 * socket, work a network card would take over on a real path.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOCKETS 8
#define BATCH 64
#define DATAGRAM_BYTES 120

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
           usage.ru_stime.tv_usec / 1e6;
}

static void drain(const int *sockets) {
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    static char buffers[BATCH][2048];
    struct pollfd polls[SOCKETS];
    long received = 0;
    for (int i = 0; i < BATCH; i++) {
        vectors[i].iov_base = buffers[i];
        vectors[i].iov_len = sizeof buffers[i];
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    for (int i = 0; i < SOCKETS; i++) {
        polls[i].fd = sockets[i];
        polls[i].events = POLLIN;
    }
    /* Half a second without a datagram: the sender is done. */
    while (poll(polls, SOCKETS, 500) > 0) {
        for (int i = 0; i < SOCKETS; i++) {
            if (polls[i].revents & POLLIN) {
                int got = recvmmsg(sockets[i], messages, BATCH, MSG_DONTWAIT, NULL);
                if (got > 0) received += got;
            }
        }
    }
    if (received == 0) {
        fprintf(stderr, "udp_cost: the reader received nothing\n");
        exit(1);
    }
    printf("received: %ld datagrams, %.2f us of CPU each\n", received,
           cpu_seconds() * 1e6 / (double)received);
}

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 2000000;
    if (count <= 0) {
        fprintf(stderr, "usage: udp_cost [DATAGRAMS > 0]\n");
        return 2;
    }
    int sockets[SOCKETS];
    struct sockaddr_in addresses[SOCKETS];
    for (int i = 0; i < SOCKETS; i++) {
        int buffer = 4 << 20;
        socklen_t length = sizeof addresses[i];
        sockets[i] = socket(AF_INET, SOCK_DGRAM, 0);
        memset(&addresses[i], 0, sizeof addresses[i]);
        addresses[i].sin_family = AF_INET;
        addresses[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(sockets[i], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
        if (sockets[i] < 0 || bind(sockets[i], (struct sockaddr *)&addresses[i], length) != 0 ||
            getsockname(sockets[i], (struct sockaddr *)&addresses[i], &length) != 0) {
            perror("udp_cost: socket");
            return 1;
        }
    }
    pid_t reader = fork();
    if (reader < 0) {
        perror("udp_cost: fork");
        return 1;
    }
    if (reader == 0) {
        drain(sockets);
        return 0;
    }
    int sender = socket(AF_INET, SOCK_DGRAM, 0);
    char payload[DATAGRAM_BYTES];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    memset(payload, 7, sizeof payload);
    for (int i = 0; i < BATCH; i++) {
        vectors[i].iov_base = payload;
        vectors[i].iov_len = sizeof payload;
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = &addresses[i % SOCKETS];
        messages[i].msg_hdr.msg_namelen = sizeof addresses[0];
    }
    long sent = 0;
    for (long batches = 1; sent < count; batches++) {
        int done = sendmmsg(sender, messages, BATCH, 0);
        if (done > 0) sent += done;
        /* A breath now and then so the reader keeps up and nothing is
           dropped for a full receive buffer. */
        if (batches % 64 == 0) usleep(200);
    }
    printf("sent: %ld datagrams of %d bytes to %d sockets, %.2f us of CPU each\n", sent,
           DATAGRAM_BYTES, SOCKETS, cpu_seconds() * 1e6 / (double)sent);
    fflush(stdout);
    int status = 0;
    waitpid(reader, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
