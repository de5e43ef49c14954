# egs stage rules
