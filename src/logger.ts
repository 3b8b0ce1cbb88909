// The pino logger: one JSON line per event, secrets redacted, pretty only on a terminal.
import { pino, type Logger } from 'pino'
import type { LogLevel } from './config.js'

const FLUSH_EVERY_MS = 100

// Where a secret could appear if a header object were logged. Arbiter logs no headers and no
// config itself; this is the guard for a debug line that someone adds later. Few paths on
// purpose: pino runs the compiled redaction on every line.
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]'
]

export interface LoggerOptions {
  /** Human-readable lines (pino-pretty), for a terminal; server.ts decides. */
  pretty?: boolean
  /** Where lines go instead of stdout (tests capture them). */
  destination?: pino.DestinationStream
}

export function createLogger (level: LogLevel, { pretty = false, destination }: LoggerOptions = {}): Logger {
  const options: pino.LoggerOptions = {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' }
  }
  if (destination !== undefined) return pino(options, destination)
  if (pretty && level !== 'silent') {
    return pino({ ...options, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } })
  }
  // Buffered stdout: lines go out in 4 KiB batches, and at least every 100 ms so a quiet
  // instance's lines still appear at once. One write per line cost more than the rest of a
  // verification's bookkeeping together. pino flushes the buffer when the process exits.
  const stdout = pino.destination({ dest: 1, sync: false, minLength: 4096 })
  setInterval(() => { stdout.flush() }, FLUSH_EVERY_MS).unref()
  return pino(options, stdout)
}
