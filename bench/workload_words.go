package bench

// vocabulary is the fixed list of words every synthetic prompt is built from.
// Each entry is a lowercase English or programming word with a leading space,
// and each is one token in the Qwen3 vocabulary, with the id given: text built
// from these words by plain concatenation tokenizes back into exactly these
// ids (the pre-tokenizer splits before every space-letter run), so the token
// ids the simulated runner feeds to the engine model and the text the live
// runner sends describe the same prompt. There are exactly 256 entries so that
// one random byte picks one word.
var vocabulary = [256]struct {
	text string
	id   uint32
}{
	{" the", 279}, {" of", 315}, {" and", 323}, {" to", 311}, {" in", 304}, {" is", 374}, {" it", 432}, {" that", 429},
	{" for", 369}, {" on", 389}, {" with", 448}, {" as", 438}, {" this", 419}, {" be", 387}, {" at", 518}, {" by", 553},
	{" from", 504}, {" or", 476}, {" an", 458}, {" are", 525}, {" not", 537}, {" but", 714}, {" have", 614}, {" was", 572},
	{" will", 686}, {" can", 646}, {" if", 421}, {" all", 678}, {" one", 825}, {" has", 702}, {" more", 803}, {" when", 979},
	{" which", 892}, {" their", 862}, {" use", 990}, {" new", 501}, {" time", 882}, {" you", 498}, {" we", 582}, {" they", 807},
	{" there", 1052}, {" these", 1493}, {" may", 1231}, {" make", 1281}, {" like", 1075}, {" also", 1083}, {" each", 1817}, {" other", 1008},
	{" into", 1119}, {" only", 1172}, {" some", 1045}, {" than", 1091}, {" then", 1221}, {" its", 1181}, {" first", 1156}, {" about", 911},
	{" would", 1035}, {" should", 1265}, {" could", 1410}, {" over", 916}, {" after", 1283}, {" before", 1573}, {" file", 1034}, {" files", 3542},
	{" line", 1555}, {" lines", 5128}, {" code", 2038}, {" function", 729}, {" return", 470}, {" value", 897}, {" values", 2750}, {" type", 943},
	{" types", 4494}, {" error", 1465}, {" errors", 5975}, {" test", 1273}, {" tests", 7032}, {" data", 821}, {" list", 1140}, {" string", 914},
	{" number", 1372}, {" name", 829}, {" names", 5036}, {" path", 1815}, {" system", 1849}, {" user", 1196}, {" model", 1614}, {" request", 1681},
	{" response", 2033}, {" server", 3538}, {" client", 2943}, {" config", 2193}, {" option", 2999}, {" options", 2606}, {" result", 1102}, {" results", 3059},
	{" field", 2070}, {" fields", 5043}, {" method", 1714}, {" class", 536}, {" object", 1633}, {" module", 4688}, {" package", 6328}, {" import", 1159},
	{" export", 7485}, {" default", 1638}, {" public", 584}, {" private", 869}, {" static", 1099}, {" const", 733}, {" var", 762}, {" let", 1077},
	{" func", 2915}, {" struct", 2036}, {" interface", 3749}, {" map", 2415}, {" set", 738}, {" get", 633}, {" put", 2182}, {" run", 1598},
	{" start", 1191}, {" stop", 2936}, {" read", 1349}, {" write", 3270}, {" open", 1787}, {" close", 3265}, {" load", 2795}, {" save", 3581},
	{" update", 2647}, {" delete", 3698}, {" create", 1855}, {" remove", 4057}, {" add", 912}, {" check", 1779}, {" find", 1477}, {" call", 1618},
	{" send", 3624}, {" build", 1936}, {" parse", 4715}, {" print", 1173}, {" format", 3561}, {" log", 1487}, {" debug", 7390}, {" info", 3546},
	{" warning", 9958}, {" message", 1943}, {" input", 1946}, {" output", 2550}, {" source", 2530}, {" target", 2169}, {" local", 2205}, {" remote", 8699},
	{" version", 2319}, {" change", 2297}, {" changes", 4344}, {" buffer", 4147}, {" cache", 6500}, {" block", 2504}, {" blocks", 10010}, {" token", 3950},
	{" tokens", 11211}, {" index", 1922}, {" key", 1376}, {" keys", 6894}, {" count", 1760}, {" size", 1379}, {" length", 3084}, {" offset", 4347},
	{" limit", 3930}, {" range", 2088}, {" end", 835}, {" next", 1790}, {" last", 1537}, {" previous", 3681}, {" current", 1482}, {" state", 1584},
	{" status", 2639}, {" event", 1538}, {" events", 4357}, {" handler", 7013}, {" context", 2266}, {" task", 3383}, {" tasks", 9079}, {" step", 3019},
	{" steps", 7354}, {" tool", 5392}, {" tools", 7375}, {" query", 3239}, {" search", 2711}, {" match", 2432}, {" pattern", 5383}, {" text", 1467},
	{" word", 3409}, {" words", 4244}, {" node", 2436}, {" nodes", 7798}, {" tree", 4916}, {" graph", 4771}, {" edge", 6821}, {" edges", 12822},
	{" root", 3704}, {" parent", 2681}, {" child", 1682}, {" children", 2841}, {" branch", 8870}, {" commit", 5266}, {" merge", 10880}, {" diff", 3638},
	{" patch", 10900}, {" fix", 5046}, {" bug", 9876}, {" issue", 4265}, {" feature", 4565}, {" support", 1824}, {" release", 4879}, {" deploy", 10517},
	{" service", 2473}, {" services", 3516}, {" worker", 11864}, {" workers", 7337}, {" queue", 7177}, {" job", 2618}, {" jobs", 6887}, {" thread", 4516},
	{" threads", 14564}, {" process", 1882}, {" memory", 4938}, {" disk", 13364}, {" network", 3922}, {" socket", 7575}, {" port", 2635}, {" host", 3468},
	{" address", 2621}, {" route", 6021}, {" router", 9273}, {" engine", 4712}, {" policy", 4842}, {" weight", 4680}, {" score", 5456}, {" sample", 6077},
	{" batch", 7162}, {" stream", 4269}, {" streams", 23045}, {" chunk", 11879}, {" chunks", 26757}, {" page", 2150}, {" pages", 6816}, {" table", 1965},
	{" row", 2802}, {" rows", 6978}, {" column", 3250}, {" columns", 8147}, {" schema", 10802}, {" record", 3255}, {" entry", 4343}, {" entries", 10695},
}
