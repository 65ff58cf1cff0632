// A plain-HTTP GET on loopback (probes, /metrics of a server without TLS),
// the whole body read; HTTPS with a token is metrics-access.ts's httpsGet.
import http from 'node:http';

export interface HttpAnswer {
  status: number;
  body: string;
}

/** GET http://`hostPort``path`. */
export function httpGet(hostPort: string, path: string): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    http
      .get(`http://${hostPort}${path}`, (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}
