// Back-pressure: at most `maxInFlight` verifications run at once and at most `maxQueue` wait
// for a slot. Beyond that a verification is refused at once with a 503 and Retry-After, so a
// burst is answered quickly instead of collapsing every request's latency.
import { ArbiterError } from './errors.js'

export type Release = () => void

export class Admission {
  readonly #maxInFlight: number
  readonly #maxQueue: number
  readonly #waiting: Array<() => void> = []
  #inFlight = 0

  constructor (options: { maxInFlight: number, maxQueue: number }) {
    this.#maxInFlight = options.maxInFlight
    this.#maxQueue = options.maxQueue
  }

  get inFlight (): number { return this.#inFlight }
  get queued (): number { return this.#waiting.length }

  /** A slot at once, or undefined when all are taken (then `acquire` waits for one). */
  tryAcquire (): Release | undefined {
    if (this.#inFlight >= this.#maxInFlight) return undefined
    this.#inFlight++
    return this.#releaser()
  }

  /** Waits for a slot; throws ARB_OVERLOADED when the queue is full. Call the release once. */
  async acquire (): Promise<Release> {
    const free = this.tryAcquire()
    if (free !== undefined) return free
    if (this.#waiting.length >= this.#maxQueue) {
      throw new ArbiterError('ARB_OVERLOADED',
        `${this.#inFlight} verifications in flight and ${this.#waiting.length} queued (ARBITER_MAX_IN_FLIGHT, ARBITER_MAX_QUEUE); retry shortly`,
        { retryAfter: 1 })
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve))
    return this.#releaser()
  }

  #releaser (): Release {
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.#waiting.shift()
      // The slot passes straight to the next waiter, so in-flight stays the same.
      if (next !== undefined) next()
      else this.#inFlight--
    }
  }
}
