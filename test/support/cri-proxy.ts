// A CRI proxy for e2e tests: a gRPC server on its own unix socket that passes
// every RuntimeService and ImageService call through to a real runtime, byte
// for byte, and lets a test act just before a chosen call is passed on (the
// interleavings a real node produces only by chance: a container started
// between kubegc's listing and its removal).
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { grpcTarget, runtimeServices } from '../../src/node/cri/client.ts';

/** Called with the method's name and its decoded request before the call is passed on. */
export type BeforeCall = (method: string, request: Record<string, unknown>) => Promise<void>;

export interface CriProxy {
  /** `unix://...`, for --cri-endpoint. */
  endpoint: string;
  close(): Promise<void>;
}

const identity = (b: Buffer): Buffer => b;

export async function criProxy(
  upstreamEndpoint: string,
  dir: string,
  before: BeforeCall = async () => undefined,
): Promise<CriProxy> {
  const socket = path.join(dir, 'cri-proxy.sock');
  fs.rmSync(socket, { force: true });
  const upstream = new grpc.Client(grpcTarget(upstreamEndpoint), grpc.credentials.createInsecure());
  const server = new grpc.Server();
  const { RuntimeService, ImageService } = runtimeServices();
  for (const ctor of [RuntimeService, ImageService]) {
    const service = (ctor as unknown as { service: grpc.ServiceDefinition }).service;
    const raw: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const [name, def] of Object.entries(service)) {
      raw[name] = {
        ...def,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      };
      const decoded = (b: Buffer): Record<string, unknown> =>
        def.requestDeserialize(b) as Record<string, unknown>;
      if (def.requestStream) continue; // no CRI method streams its requests
      handlers[name] = def.responseStream
        ? (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
            before(name, decoded(call.request)).then(
              () => {
                const up = upstream.makeServerStreamRequest(
                  def.path,
                  identity,
                  identity,
                  call.request,
                  call.metadata,
                );
                up.on('data', (b: Buffer) => call.write(b));
                up.on('error', (err: grpc.ServiceError) => call.destroy(err));
                up.on('end', () => call.end());
                call.on('cancelled', () => up.cancel());
              },
              (err: unknown) =>
                call.destroy(
                  Object.assign(new Error(`cri proxy: ${String(err)}`), {
                    code: grpc.status.INTERNAL,
                  }),
                ),
            );
          }
        : (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
            before(name, decoded(call.request))
              .then(() => {
                upstream.makeUnaryRequest(
                  def.path,
                  identity,
                  identity,
                  call.request,
                  call.metadata,
                  (err, res) => cb(err, res),
                );
              })
              .catch((err: unknown) =>
                cb({ code: grpc.status.INTERNAL, details: `cri proxy: ${String(err)}` }),
              );
          };
    }
    server.addService(raw, handlers);
  }
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  return {
    endpoint: `unix://${socket}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => {
          upstream.close();
          resolve();
        });
      }),
  };
}
