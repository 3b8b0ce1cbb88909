// The 200 side of the wire contract: a VerifierResult (plugin, endpoint) or a RubricJudgeResult
// (rubric), both carrying `reward`. The response schema is derived from both and lists their
// fields flat, so the serializer stays a fast object writer; the static types keep them apart.
import { Type, type Static } from 'typebox'

// The fields each kind reports are declared (all optional beyond kind and ref) so that they are
// documented, and written by the serializer directly rather than through its catch-all for
// undeclared properties (a rubric result: 3.3 -> 2.1 µs). Other fields still pass through, as
// does `version` (a string for plugins, an integer for rubrics): a union would make the
// serializer run a validator on every response, and throw on a value of neither type.
export const ProvenanceSchema = Type.Object({
  kind: Type.String(),
  ref: Type.String(),
  plugin: Type.Optional(Type.String({ description: 'plugin: the environment plugin that answered' })),
  digest: Type.Optional(Type.String({ description: 'plugin: the sha256 content digest of its files' })),
  runtime: Type.Optional(Type.String({ description: 'plugin: python or node' })),
  rubric: Type.Optional(Type.String({ description: 'rubric: owner/name@version' })),
  content_hash: Type.Optional(Type.String({ description: 'rubric: the sha256 of the rubric file' })),
  judge_model: Type.Optional(Type.String({ description: 'rubric: the model the judge server reports' })),
  judge_model_requested: Type.Optional(Type.String()),
  temperature: Type.Optional(Type.Number()),
  samples: Type.Optional(Type.Integer()),
  response_format: Type.Optional(Type.String()),
  judge_calls: Type.Optional(Type.Integer()),
  reasks: Type.Optional(Type.Integer()),
  usage: Type.Optional(Type.Object({ prompt_tokens: Type.Optional(Type.Number()), completion_tokens: Type.Optional(Type.Number()), total_tokens: Type.Optional(Type.Number()) }, { description: 'rubric: token usage the judge server reported, summed over calls' })),
  disagreement: Type.Optional(Type.Number({ description: 'rubric: how much the samples disagreed, 0 to 1' }))
}, { additionalProperties: true, description: 'Which verifier answered, with its version (plugin: its manifest version; rubric: the rubric version used), digest or model' })
export type Provenance = Static<typeof ProvenanceSchema> & Record<string, unknown>

export const DimensionScoreSchema = Type.Object({
  dimension: Type.String(),
  score: Type.Number(),
  reason: Type.String()
})
export type DimensionScore = Static<typeof DimensionScoreSchema>

export const VerifierResultSchema = Type.Object({
  reward: Type.Number(),
  success: Type.Boolean(),
  message: Type.String(),
  output: Type.String(),
  verifier: ProvenanceSchema
})
export type VerifierResult = Omit<Static<typeof VerifierResultSchema>, 'verifier'> & { verifier: Provenance }

export const RubricJudgeResultSchema = Type.Object({
  reward: Type.Number(),
  score: Type.Number(),
  verdict: Type.Enum(['PASS', 'FAIL']),
  confidence: Type.Number(),
  evidence: Type.Array(Type.String()),
  failed_criteria: Type.Array(Type.String()),
  dimension_scores: Type.Array(DimensionScoreSchema),
  truncated: Type.Optional(Type.Boolean({ description: 'The trajectory was cut to the judge budget' })),
  cached: Type.Optional(Type.Boolean({ description: 'Served from the verdict cache, or shared with an identical verification judged at the same moment' })),
  verifier: ProvenanceSchema
})
export type RubricJudgeResult = Omit<Static<typeof RubricJudgeResultSchema>, 'verifier'> & { verifier: Provenance }

/** What a kind handler returns; the route adds duration_ms. */
export type VerificationOutcome = VerifierResult | RubricJudgeResult

export const VerifyResponseSchema = Type.Object({
  reward: Type.Number({ description: 'A finite reward that a verifier actually produced', examples: [0.83] }),
  ...Type.Partial(Type.Omit(VerifierResultSchema, ['reward', 'verifier'])).properties,
  ...Type.Partial(Type.Omit(RubricJudgeResultSchema, ['reward', 'verifier'])).properties,
  verifier: ProvenanceSchema,
  duration_ms: Type.Number()
}, { description: 'VerifierResult (plugin, endpoint) or RubricJudgeResult (rubric), plus reward' })
export type VerifyResponse = Static<typeof VerifyResponseSchema>
