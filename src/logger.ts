// The pino logger: one JSON line per event, secrets redacted, pretty only on a terminal.
import { pino, type Logger } from 'pino'
import type { LogLevel } from './config.js'

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["api-key"]',
  'authorization',
  'apiKey',
  'judgeApiKey',
  'config.judgeApiKey',
  'config.apiTokens'
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
  // Asynchronous stdout: lines written while a write is in flight go out together, so logging
  // costs one syscall per batch under load and still appears at once when traffic is light.
  // pino flushes it when the process exits.
  return pino(options, pino.destination({ dest: 1, sync: false }))
}
