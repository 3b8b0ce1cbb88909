// The deadline of one verification, shared by everything it waits on: a queue slot, a socket,
// the sleep before a retry. `signal` aborts when the deadline passes (or when the work is
// stopped early); `fits` tells whether a wait would end before it. A controller and a timer
// cost less per verification than AbortSignal.timeout or AbortSignal.any on Node 20.
import { setTimeout as sleep } from 'node:timers/promises'

export class Deadline {
  /** When it passes, in Date.now() milliseconds. */
  readonly at: number
  readonly #controller = new AbortController()
  readonly #timer: NodeJS.Timeout

  constructor (ms: number, what: string) {
    this.at = Date.now() + ms
    this.#timer = setTimeout(() => { this.#controller.abort(new DOMException(`the ${what} deadline passed`, 'TimeoutError')) }, ms)
    this.#timer.unref()
  }

  get signal (): AbortSignal { return this.#controller.signal }

  /** True once it passed, not when the work was stopped early. */
  get passed (): boolean { return this.signal.aborted && this.signal.reason instanceof DOMException }

  /** Whether a wait of `ms` would end before the deadline. */
  fits (ms: number): boolean { return Date.now() + ms < this.at }

  /** Waits `ms`; rejects when the deadline passes (or the work is stopped) first. */
  async sleep (ms: number): Promise<void> { await sleep(ms, undefined, { signal: this.signal }) }

  /** Stops everything waiting on it now, with `reason`. */
  stop (reason: unknown): void { this.#controller.abort(reason) }

  /** The work is over: the timer goes. */
  clear (): void { clearTimeout(this.#timer) }
}
