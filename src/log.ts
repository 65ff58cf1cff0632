// Structured JSON logs, one object per line on stderr: {"ts","level","msg",...fields}.
export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };
export const LEVELS = Object.keys(ORDER) as Level[];

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  enabled(level: Level): boolean;
}

export function createLogger(
  level: Level = 'info',
  write: (line: string) => void = (l) => process.stderr.write(l),
): Logger {
  const min = ORDER[level];
  const emit = (lvl: Level, msg: string, fields?: Record<string, unknown>): void => {
    if (ORDER[lvl] < min) return;
    write(`${JSON.stringify({ ts: new Date().toISOString(), level: lvl, msg, ...fields })}\n`);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    enabled: (l) => ORDER[l] >= min,
  };
}

export const silentLogger: Logger = createLogger('error', () => undefined);
