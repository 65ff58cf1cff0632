// `kubegc node`: image and container garbage collection over CRI (being built).
import { UsageError } from './flags.ts';

export function nodeCommand(_argv: string[]): Promise<number> {
  return Promise.reject(new UsageError('"node" is not implemented in this version'));
}
