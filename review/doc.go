// Package review is what a human reads before approving a Mission, one
// rendering for every terminal that asks: `mwp-worker up`, the `up` of a
// program built on workercmd, `poc approve` and `mission status` of a
// Mission awaiting approval. A View folds the Group's log (group.Fold,
// the same fold as everyone's) plus what a reviewer reads: per stage in
// plan order, the handler's own evidence, its outputs by output name with
// a short preview, and the coordinator's review in one line. Ask reads
// the decision from a terminal. Bytes in, text out: the caller reads the
// log and the artifacts.
package review
