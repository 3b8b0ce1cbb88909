// The pino logger: one JSON line per event, secrets redacted, pretty only on a terminal.
import { pino, type Logger } from 'pino'
import type { LogLevel } from './config.js'

const FLUSH_EVERY_MS = 100
/** Characters of log lines gathered before they are written. */
const BATCH_CHARS = 4096

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
  // verification's bookkeeping together.
  const lines = new LineBatch(pino.destination({ dest: 1, sync: false, minLength: BATCH_CHARS }))
  setInterval(() => { lines.flush() }, FLUSH_EVERY_MS).unref()
  process.on('exit', () => {
    try {
      lines.flushSync()
    } catch {
      // stdout is closed or broken: there is nowhere left to write the last lines.
    }
  })
  return pino(options, lines)
}

/** What sonic-boom (pino's destination) offers that LineBatch uses. */
export interface LineSink {
  write: (text: string) => boolean
  flush: () => void
  flushSync: () => void
}

/**
 * Collects log lines and hands them to the destination about 4 KiB at a time. sonic-boom
 * measures its pending text with Buffer.byteLength on every write, which flattens the text
 * gathered so far: fed line by line, that copied about 2 KiB per line, a fifth of all a
 * verification allocated. Lines keep their order; flush() and flushSync() hand over the rest.
 */
export class LineBatch {
  #lines: string[] = []
  #chars = 0
  readonly #sink: LineSink

  constructor (sink: LineSink) {
    this.#sink = sink
  }

  write (line: string): boolean {
    this.#lines.push(line)
    this.#chars += line.length
    if (this.#chars >= BATCH_CHARS) this.#handOver()
    return true
  }

  /** Hands over what is gathered and starts writing it (asynchronously). */
  flush (): void {
    this.#handOver()
    this.#sink.flush()
  }

  /** Hands over what is gathered and writes it all before returning (at exit). */
  flushSync (): void {
    this.#handOver()
    this.#sink.flushSync()
  }

  #handOver (): void {
    if (this.#lines.length === 0) return
    const text = this.#lines.length === 1 ? this.#lines[0] : this.#lines.join('')
    this.#lines = []
    this.#chars = 0
    this.#sink.write(text)
  }
}
