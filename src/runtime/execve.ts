/**
 * Node's process.execve (Node ≥ 22.15; the installed @types/node does not declare it yet): replaces
 * this process with `file`, keeping its PID. Undefined on an older Node. Node aborts the process when
 * the exec fails, so a caller proves with a trial start first that `file` runs here.
 */
export const execve = (process as unknown as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve?.bind(process);
