// The pino logger: one JSON line per event, secrets redacted, pretty only on a terminal.
import { writeSync } from 'node:fs'
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
  // The exit hooks are registered before pino.destination() registers its own, so they run
  // first: the lines gathered here reach the destination before pino flushes (and, on
  // beforeExit, ends) it. beforeExit only hands them over: starting a write there would keep
  // the event loop alive and bring beforeExit back, for ever.
  let lines: LineBatch | undefined
  // stdout closed or broken (or ended by pino at exit): there is nowhere left to write to.
  const orNowhere = (write: () => void): void => { try { write() } catch {} }
  process.on('beforeExit', () => { orNowhere(() => lines?.handOver()) })
  process.on('exit', () => { orNowhere(() => lines?.flushSync()) })
  lines = new LineBatch(pino.destination({ dest: 1, sync: false, minLength: BATCH_CHARS }), 1)
  setInterval(() => { orNowhere(() => lines?.flush()) }, FLUSH_EVERY_MS).unref()
  return pino(options, lines)
}

/** What sonic-boom (pino's destination) offers that LineBatch uses. */
export interface LineSink {
  write: (text: string) => boolean
  flush: (done?: (error?: Error) => void) => void
  flushSync: () => void
}

/** How long the last lines may wait for a full pipe at exit before they are given up. */
const EXIT_WRITE_MS = 1000

/**
 * Collects log lines and hands them to the destination about 4 KiB at a time. sonic-boom
 * measures its pending text with Buffer.byteLength on every write, which flattens the text
 * gathered so far: fed line by line, that copied about 2 KiB per line, a fifth of all a
 * verification allocated. Lines keep their order: flush() hands over the rest, flushSync() (at
 * exit) writes it.
 */
export class LineBatch {
  #lines: string[] = []
  #chars = 0
  readonly #sink: LineSink
  /** The file descriptor the sink writes to, for the last lines at exit. */
  readonly #fd: number

  constructor (sink: LineSink, fd: number) {
    this.#sink = sink
    this.#fd = fd
  }

  write (line: string): boolean {
    this.#lines.push(line)
    this.#chars += line.length
    if (this.#chars >= BATCH_CHARS) this.handOver()
    return true
  }

  /** Hands over what is gathered and starts writing it (asynchronously); pino's logger.flush(cb). */
  flush (done?: (error?: Error) => void): void {
    this.handOver()
    this.#sink.flush(done)
  }

  /**
   * Writes everything before returning (at exit): what the destination holds, then what is
   * gathered here, written directly. Handed over instead, it could start an asynchronous write
   * that the exiting process never finishes.
   */
  flushSync (): void {
    const text = this.#take()
    this.#sink.flushSync()
    let rest = Buffer.from(text)
    const giveUpAt = Date.now() + EXIT_WRITE_MS
    while (rest.length > 0) {
      try {
        rest = rest.subarray(writeSync(this.#fd, rest))
      } catch (error) {
        // stdout is a non-blocking pipe whose reader is behind: wait for it, but not forever.
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > giveUpAt) throw error
      }
    }
  }

  /** Gives what is gathered to the destination, which writes it in its own time. */
  handOver (): void {
    const text = this.#take()
    if (text !== '') this.#sink.write(text)
  }

  #take (): string {
    if (this.#lines.length === 0) return ''
    const text = this.#lines.length === 1 ? this.#lines[0] : this.#lines.join('')
    this.#lines = []
    this.#chars = 0
    return text
  }
}
