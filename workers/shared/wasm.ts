/**
 * The WebAssembly API the C kernels are run with (the project compiles without the DOM library,
 * which types it): each kernel module imports its memory from here and exports plain functions.
 */
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number }) => WasmMemory;
}
const api = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/** Bytes in a page of WebAssembly memory. */
export const WASM_PAGE = 65536;

/** A module compiled from its base64 text (a generated `*-wasm.ts` or `kernels.ts`). */
export function compileWasm(base64: string): object {
  return new api.Module(Buffer.from(base64, 'base64'));
}

/** An instance of `module` over a new memory of `pages` pages, and that memory. */
export function instantiateWasm<T>(module: object, pages: number): { exports: T; memory: WasmMemory } {
  const memory = new api.Memory({ initial: pages });
  return { exports: new api.Instance(module, { env: { memory } }).exports as T, memory };
}
