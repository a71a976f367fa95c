// Package projection is the toolkit for read models built from change
// events (BEST_EFFORT subscribers of record.* types). Change events arrive
// unordered, may repeat and may go missing; a Projector makes the read model
// converge on each entity's latest version anyway:
//
//   - Apply by version: a change older than or equal to what is projected is
//     skipped (a duplicate, or a late write after a newer one); the next
//     version is applied, then any parked successors.
//   - Park gaps: a change that arrives before its predecessor is parked in
//     the state table and applied when the gap closes. A park is counted
//     (keys.MetricProjParked); SweepParks reports every park older than a
//     threshold (keys.MetricProjParkAged, an ERROR line) and every park about
//     to reach its TTL (keys.MetricProjParkExpiring), and first tries to close
//     the gap from the source. A park never expires unreported.
//   - Versioned tombstones: a delete leaves a row at its version that no late
//     write of that version or an older one can overwrite.
//   - Compare: a pass over the source (a tracked table) and the projection
//     that repairs every row that is missing, behind, divergent or orphaned,
//     and reports what it repaired (keys.MetricProjRepaired). It resumes from
//     a saved cursor.
//   - Rebuild: builds a shadow projection from the source, resuming from a
//     saved cursor; while it runs the Projector writes live changes to the
//     shadow too (catch up); when the scan ends it records the switch.
//
// Stores keep rows and parks. Table keeps them in DynamoDB (the projection's
// table and the state table); Memory is for tests. Both pass the same tests.
package projection
