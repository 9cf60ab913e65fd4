"""`/track`: an org's records and requirements (records.py, the record book) and the command's parser
(parse.py). The weekly digest (bot.digest) reads what is recorded here."""
