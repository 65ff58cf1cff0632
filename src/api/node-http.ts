// node:http, taken with process.getBuiltinModule instead of an import
// statement. An ES import of node:http builds its module namespace, which
// reads every export, including the lazy WebSocket, CloseEvent and
// MessageEvent getters: they load and compile all of undici, which kubegc
// never uses (the import took 55-77 ms against 8-11 ms on 2 cores, about a
// fifth of kubegc's start on a near-empty cluster). Types still come from
// `import type http from 'node:http'`, which is erased.
export const httpModule = process.getBuiltinModule('node:http');
