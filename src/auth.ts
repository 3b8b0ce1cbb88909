// Optional bearer tokens. Tokens are compared as SHA-256 digests with timingSafeEqual against
// every configured token (no early exit), so neither a token's content nor its length leaks
// through response timing.
import { hash, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ArbiterError, ConfigError } from './errors.js'

function digest (token: string): Buffer {
  return hash('sha256', token, 'buffer')
}

export class BearerAuth {
  readonly #digests: Buffer[]

  constructor (tokens: string[]) {
    this.#digests = tokens.map(digest)
  }

  /** Tokens from ARBITER_API_TOKENS and ARBITER_API_TOKENS_FILE (one per line, # comments). */
  static fromSettings (tokens: string[], file: string | undefined): BearerAuth {
    const all = [...tokens]
    if (file !== undefined) {
      let text: string
      try {
        text = readFileSync(file, 'utf8')
      } catch (error) {
        throw new ConfigError('ARBITER_API_TOKENS_FILE', `cannot read ${file}: ${(error as Error).message}`)
      }
      for (const line of text.split('\n')) {
        const token = line.trim()
        if (token !== '' && !token.startsWith('#')) all.push(token)
      }
      if (all.length === tokens.length) throw new ConfigError('ARBITER_API_TOKENS_FILE', `${file} holds no token`)
    }
    return new BearerAuth(all)
  }

  get enabled (): boolean {
    return this.#digests.length > 0
  }

  /** Throws ARB_UNAUTHORIZED unless the Authorization header carries a configured token. */
  check (header: string | undefined): void {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')
    if (match === null) {
      throw new ArbiterError('ARB_UNAUTHORIZED', header === undefined
        ? 'this route requires a bearer token: send Authorization: Bearer <token> (ARBITER_API_TOKENS)'
        : 'the Authorization header must be "Bearer <token>"')
    }
    const given = digest(match[1])
    let valid = false
    for (const known of this.#digests) valid = timingSafeEqual(given, known) || valid
    if (!valid) throw new ArbiterError('ARB_UNAUTHORIZED', 'the bearer token is not one of this instance\'s tokens')
  }
}
