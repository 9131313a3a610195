/**
 * Ends the process with `code`, or by a signal while a worker thread is busy (running a job, or told
 * to end and still inside a native call). `process.exit` joins every worker thread, and a thread
 * terminated in the middle of a native call (oxipng on a 90 MP PNG: one libdeflate call of minutes)
 * ends only when the call returns: a stop whose jobs are already handed back would outlast systemd's
 * TimeoutStopSec and Docker's stop timeout. A signal ends the process without the join: SIGTERM
 * for a clean stop (systemd counts it as one), SIGKILL for a failure (a supervisor restarts the
 * process, as after exit 1).
 */
export function exitProcess(code: number, threadsBusy: number): never {
  if (threadsBusy > 0) {
    const signal = code === 0 ? 'SIGTERM' : 'SIGKILL';
    // With no listener left, Node's own SIGTERM action ends the process at once.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code);
}
