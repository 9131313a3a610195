/**
 * Ends the process with `code`, or by a signal while a worker thread is busy (running a job, or told
 * to end and still inside a native call). `process.exit` joins every worker thread, and a thread
 * terminated in the middle of a native call (oxipng on a 90 MP PNG: one libdeflate call of minutes)
 * ends only when the call returns: a server stop whose jobs are already handed back would outlast
 * systemd's TimeoutStopSec and Docker's stop timeout, an interrupted `compress` would ignore its
 * Ctrl-C for as long. A signal ends the process without the join: by default SIGTERM for a clean
 * stop (systemd counts it as one), SIGKILL for a failure (a supervisor restarts the process, as
 * after exit 1).
 */
export function exitProcess(code: number, threadsBusy: number, signal: NodeJS.Signals = code === 0 ? 'SIGTERM' : 'SIGKILL'): never {
  // PID 1 (a container without an init) cannot end itself by a signal: there the exit waits.
  if (threadsBusy > 0 && process.pid !== 1) {
    // What process.exit would run first: its 'exit' listeners (the logger writes its buffered lines there).
    process.emit('exit', code);
    // With no listener left, Node's own action for SIGTERM and SIGINT ends the process at once.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code);
}
