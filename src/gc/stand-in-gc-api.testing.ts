// For unit tests: a GcApi whose KubeClient talks to a stand-in API server
// (node:http on a loopback port, see src/api/stand-in-server.testing.ts), and
// the teardown of both.
import type http from 'node:http';
import { listenAndConnect } from '../api/stand-in-server.testing.ts';
import { GcApi } from './operations.ts';

export interface StandInGcApi {
  api: GcApi;
  /** Closes the client, then the server (its open connections cut). */
  close(): Promise<void>;
}

/** Starts `server` and returns a GcApi of it (no client-side rate limit to speak of). */
export async function standInGcApi(server: http.Server): Promise<StandInGcApi> {
  const client = await listenAndConnect(server, { qps: 1000, burst: 1000 });
  return {
    api: new GcApi(client),
    close: async () => {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
