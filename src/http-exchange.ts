// One HTTP request and its whole answer, read into memory, through an undici dispatcher: the
// endpoint kind's scorer call and the judge call both go through here. undici's request()
// wraps every answer in a Readable stream; these answers are small JSON documents read whole,
// and a bare dispatch handler costs about a third less CPU per call (18 vs 27 µs here), which
// is a large share of a verification.
import type { IncomingHttpHeaders } from 'node:http'
import { errors, type Dispatcher } from 'undici'
import type { StopSignal } from './deadline.js'

export interface ExchangeRequest {
  /** Needed when the dispatcher is an Agent; a Pool knows its origin. */
  origin?: string
  path: string
  headers: Record<string, string>
  body: Buffer
  /** Aborts the exchange, wherever it is (queued, connecting, reading); the promise rejects with its reason. */
  signal: StopSignal
  /** A 2xx answer that declares a larger content-length is refused before its body is read. */
  maxBytes: number
  /**
   * Of a non-2xx answer at most this many bytes are kept (default 4 KiB), for an error message;
   * the connection is then dropped instead of reading an error page of any size.
   */
  errorPeekBytes?: number
}

export interface ExchangeAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

const isSuccess = (status: number): boolean => status >= 200 && status < 300

const ERROR_PEEK_BYTES = 4096

/** POSTs `request.body` and resolves with the status, headers and body of the answer. */
export async function exchange (dispatcher: Dispatcher, request: ExchangeRequest): Promise<ExchangeAnswer> {
  request.signal.throwIfAborted()
  const peekBytes = request.errorPeekBytes ?? ERROR_PEEK_BYTES
  return await new Promise<ExchangeAnswer>((resolve, reject) => {
    const { signal } = request
    const chunks: Buffer[] = []
    let size = 0
    let status = 0
    let headers: IncomingHttpHeaders = {}
    let controller: Dispatcher.DispatchController | undefined
    let settled = false
    // Set when the answer was cut on purpose (an error page's prefix is all we keep).
    let peeked = false

    const finish = (error: unknown): void => {
      if (settled) return
      settled = true
      signal.removeEventListener('abort', onAbort)
      if (error !== undefined) {
        reject(error)
        return
      }
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)
      resolve({ status, headers, body: peeked ? body.subarray(0, peekBytes) : body })
    }
    // Settles at once, even while the request still waits in the dispatcher's queue.
    function onAbort (): void {
      controller?.abort(signal.reason as Error)
      finish(signal.reason)
    }
    signal.addEventListener('abort', onAbort)

    dispatcher.dispatch({ origin: request.origin, path: request.path, method: 'POST', headers: request.headers, body: request.body }, {
      onRequestStart (started) {
        controller = started
        if (settled) started.abort(signal.reason as Error)
      },
      onResponseStart (started, statusCode, responseHeaders) {
        status = statusCode
        headers = responseHeaders as IncomingHttpHeaders
        if (isSuccess(statusCode) && Number(headers['content-length']) > request.maxBytes) {
          const error = new errors.ResponseExceededMaxSizeError(`declared content-length ${String(headers['content-length'])} is over ${request.maxBytes} bytes`)
          started.abort(error)
          finish(error)
        }
      },
      onResponseData (started, chunk) {
        chunks.push(chunk)
        size += chunk.length
        if (!isSuccess(status) && size >= peekBytes) {
          peeked = true
          started.abort(new errors.RequestAbortedError('error page read far enough'))
          finish(undefined)
        }
      },
      onResponseEnd () { finish(undefined) },
      onResponseError (_started, error) { finish(peeked ? undefined : error) }
    })
  })
}
