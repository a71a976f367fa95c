package chain

import "io"

// VerifyExportDecoding is VerifyExport with the in-place path off: every line
// decoded and re-encoded. Tests compare the two.
func VerifyExportDecoding(r io.Reader, tenant string) (ExportSummary, error) {
	return verifyExport(r, tenant, false)
}
