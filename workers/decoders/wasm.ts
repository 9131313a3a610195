/**
 * The few WebAssembly APIs the WASM decoders use. The project compiles without the DOM library,
 * which is where TypeScript keeps the WebAssembly typings, so they are described here.
 */
export type WasmModule = object & { readonly __wasmModule?: never };
export type WasmInstance = object & { readonly __wasmInstance?: never };

export interface WasmMemory {
  readonly buffer: ArrayBufferLike;
}

interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  instantiate(module: WasmModule, imports: object): Promise<WasmInstance>;
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
}

export const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
