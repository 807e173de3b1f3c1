package snapshot

// The external tests change a file between the walk and its open, or
// between the open and the read, through these.
var BeforeOpen, AfterOpen = &beforeOpen, &afterOpen
