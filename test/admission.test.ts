import t from 'tap'
import { Admission } from '../src/admission.js'
import { ArbiterError } from '../src/errors.js'

t.test('slots, a bounded queue, then ARB_OVERLOADED with Retry-After', async (t) => {
  const admission = new Admission({ maxInFlight: 2, maxQueue: 1 })
  const first = await admission.acquire()
  const second = await admission.acquire()
  t.equal(admission.inFlight, 2)
  let thirdStarted = false
  const third = admission.acquire().then((release) => { thirdStarted = true; return release })
  t.equal(admission.queued, 1)
  const refused = await admission.acquire().catch((error: unknown) => error)
  t.ok(refused instanceof ArbiterError)
  t.match(refused, { code: 'ARB_OVERLOADED', statusCode: 503, retryable: true, retryAfter: 1 })

  first()
  first() // releasing twice must not free a second slot
  const releaseThird = await third
  t.ok(thirdStarted)
  t.equal(admission.inFlight, 2, 'the slot passed to the waiter')
  second()
  releaseThird()
  t.equal(admission.inFlight, 0)
  t.equal(admission.queued, 0)
})
