/*
 * compressd-init: what the executable puts in front of itself when it starts as PID 1 (a container
 * without an init; src/runtime/pid1.ts). The kernel gives PID 1 no default signal actions: a server
 * there cannot end itself by a signal, so a stop whose worker thread is inside a long native call
 * (Node's exit joins that thread) waited for Docker's SIGKILL. This program stays PID 1 and runs the
 * server as its child, which ends as any process does.
 *
 *   compressd-init FILE ARGV0 [ARG...]   run FILE with argv ARGV0 ARG...; exit as it does
 *   compressd-init --probe               print "compressd-init" (proves that it runs here)
 *
 * The child gets the signals a stop or an operator sends (TERM, INT, HUP, QUIT, USR1, USR2); on a
 * terminal it leads its own foreground process group, so a Ctrl-C reaches it once, from the terminal,
 * not a second time through this program (the server exits at once on a second signal). Every process
 * that ends under PID 1 is reaped. The exit status is the child's, or 128 + the signal that ended it
 * (as a shell reports it; the kernel does not let PID 1 end by that signal itself).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void run_child(char *file, char **argv, const sigset_t *mask) {
  setpgid(0, 0);
  if (isatty(STDIN_FILENO)) {
    // Taking the terminal from a background group raises SIGTTOU, which would stop this process.
    signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    signal(SIGTTOU, SIG_DFL);
  }
  sigprocmask(SIG_SETMASK, mask, NULL);
  execv(file, argv);
  fprintf(stderr, "compressd-init: %s: %s\n", file, strerror(errno));
  _exit(127);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
    puts("compressd-init");
    return 0;
  }
  if (argc < 3) {
    fputs("usage: compressd-init FILE ARGV0 [ARG...]\n", stderr);
    return 2;
  }
  // Blocked before the fork, so none arrives between it and the wait below; the child unblocks them.
  sigset_t waited, previous;
  sigemptyset(&waited);
  for (size_t i = 0; i < COUNT(FORWARDED); i++) sigaddset(&waited, FORWARDED[i]);
  sigaddset(&waited, SIGCHLD);
  sigprocmask(SIG_BLOCK, &waited, &previous);
  signal(SIGTTIN, SIG_IGN);
  signal(SIGTTOU, SIG_IGN);

  pid_t child = fork();
  if (child < 0) {
    perror("compressd-init: fork");
    return 1;
  }
  if (child == 0) {
    signal(SIGTTIN, SIG_DFL);
    signal(SIGTTOU, SIG_DFL);
    run_child(argv[1], argv + 2, &previous);
  }

  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&waited, &info);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      kill(child, sig);
      continue;
    }
    int status;
    pid_t ended;
    while ((ended = waitpid(-1, &status, WNOHANG)) > 0) {
      if (ended != child) continue;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
  }
}
