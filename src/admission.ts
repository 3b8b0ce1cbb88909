// Back-pressure: at most `maxInFlight` verifications run at once and at most `maxQueue` wait
// for a slot. Beyond that a verification is refused at once with a 503 and Retry-After, so a
// burst is answered quickly instead of collapsing every request's latency.
import { ArbiterError } from './errors.js'
import { Slots } from './slots.js'

export class Admission extends Slots {
  constructor (options: { maxInFlight: number, maxQueue: number }) {
    super(options.maxInFlight, {
      maxQueue: options.maxQueue,
      error: (active, queued) => new ArbiterError('ARB_OVERLOADED',
        `${active} verifications in flight and ${queued} queued (ARBITER_MAX_IN_FLIGHT, ARBITER_MAX_QUEUE); retry shortly`,
        { retryAfter: 1 })
    })
  }

  get inFlight (): number { return this.active }
}
