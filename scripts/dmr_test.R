# Rule dmr_test: one contig group of every DMR contrast tested with DSS (Bioconductor): DMLtest
# per site, then callDMR, with the parameters of config dmr: (numapore.methylation.dmr passes
# them, one list per contrast). Its input per contrast is the group's counts table (chrom, pos
# 1-based, then N.<column> and X.<column>: valid coverage and modified calls of each sample or
# haplotype); its outputs are DSS's own tables as DSS returns them (fwrite: every digit), in the
# input's contig order, which rule dmr_merge puts together. Everything DSS says goes to the log.

log <- file(snakemake@log[[1]], open = "wt")
sink(log)
sink(log, type = "message")

contrasts <- snakemake@params[["contrasts"]]
counts <- unlist(snakemake@input[["counts"]])
# A contig group with no site in any contrast (fewer contigs than scatter.dmr): empty tables,
# without loading DSS (~15 s of CPU).
empty <- all(vapply(counts, function(path) length(readLines(path, n = 2L)) < 2L, logical(1)))
if (!empty) {
  suppressPackageStartupMessages(library(DSS))
  cat("DSS", as.character(packageVersion("DSS")), "on", R.version.string, "\n")
}
library(data.table)
sites_out <- unlist(snakemake@output[["sites"]])
dmrs_out <- unlist(snakemake@output[["dmrs"]])
summary_out <- snakemake@output[["summary"]]
ncores <- max(1L, as.integer(snakemake@threads))
summary <- "contrast\tsites\ttested\tdmrs"

SITE_COLUMNS <- c(
  "chr", "pos", "mu1", "mu2", "diff", "diff.se", "stat", "phi1", "phi2", "pval", "fdr"
)
DMR_COLUMNS <- c(
  "chr", "start", "end", "length", "nCG", "meanMethy1", "meanMethy2", "diff.Methy", "areaStat"
)

# A per-sample data frame (chr, pos, N, X) of the sites it covers, as DSS's makeBSseqData takes.
sample_frame <- function(table, column) {
  n <- table[[paste0("N.", column)]]
  keep <- n > 0
  data.frame(
    chr = table$chrom[keep], pos = table$pos[keep], N = n[keep],
    X = table[[paste0("X.", column)]][keep]
  )
}

# Rows of a DSS table in the counts table's contig order, by position within a contig.
in_input_order <- function(result, contigs, position) {
  as.data.frame(result)[order(match(result$chr, contigs), result[[position]]), , drop = FALSE]
}

write_table <- function(rows, columns, path) {
  if (is.null(rows) || nrow(rows) == 0) {
    writeLines(paste(columns, collapse = "\t"), path)
  } else {
    fwrite(rows[, columns], path, sep = "\t", quote = FALSE)
  }
}

# The process's peak resident memory (Linux's VmHWM), for the log of a job in regions.
peak_memory <- function() {
  status <- if (file.exists("/proc/self/status")) readLines("/proc/self/status") else character()
  line <- grep("^VmHWM:", status, value = TRUE)
  if (length(line) == 0) return("unknown")
  sprintf("%.2f GiB", as.numeric(gsub("[^0-9]", "", line)) / 2^20)
}

# Which of a region's sites have a valid call in any of columns.
covers <- function(table, columns) {
  Reduce(`|`, lapply(columns, function(col) table[[paste0("N.", col)]] > 0))
}

# The sites DMLtest tests: DSS's coverage filter (hasCoverage, windowed) true on both sides.
dss_sites <- function(bs, group1, group2) {
  kept <- function(group) {
    DSS:::hasCoverage(as.array(bsseq::getCoverage(bs[, group], type = "Cov")), start(bs))
  }
  sum(kept(group1) & kept(group2))
}

# DMLtest and callDMR on the rows of one region (config dmr.max_memory_gb cuts a shard into
# regions tested one after the other; without it, the whole shard is one): DSS's tables in the
# input's contig order.
test_region <- function(table, contrast, group1, group2, contigs) {
  columns <- c(group1, group2)
  side1 <- covers(table, group1)
  side2 <- covers(table, group2)
  bs <- makeBSseqData(lapply(columns, function(col) sample_frame(table, col)), columns)
  # DMLtest's sites are those DSS's own coverage filter keeps on both sides (its first step),
  # asked of DSS, not re-derived: windowed (200 bp), it can keep sites one side covers near
  # sites the other covers. With none, DMLtest stops with an R error.
  tested <- dss_sites(bs, group1, group2)
  if (tested == 0L) {
    both <- sum(side1 & side2)
    cat(if (both == 0L) {
      sprintf(
        "no site of %s to %s is covered on both sides (%d by %s, %d by %s): nothing to test\n",
        table$chrom[1], table$chrom[nrow(table)], sum(side1), contrast$label1, sum(side2),
        contrast$label2
      )
    } else {
      sprintf(
        paste(
          "no site of %s to %s passes DSS's coverage filter on both sides (%d sites both",
          "sides cover, too few reads near them): nothing to test\n"
        ),
        table$chrom[1], table$chrom[nrow(table)], both
      )
    })
    return(list(sites = NULL, dmrs = NULL))
  }
  # DSS's one-core dispersion loop (2.46, and its source today) stops with "missing value where
  # TRUE/FALSE needed" when it has 50 sites or fewer: its progress step, round(sites / 100), is
  # 0. Its parallel loop computes the same values.
  cores <- if (ncores == 1L && tested <= 50L) 2L else ncores
  sink(nullfile()) # DMLtest's progress bar (its messages and warnings still go to the log)
  test <- DMLtest(
    bs, group1 = group1, group2 = group2, smoothing = isTRUE(contrast$smoothing),
    smoothing.span = contrast$smoothing_span, ncores = cores
  )
  sink()
  rm(bs)
  dmrs <- NULL
  if (nrow(test) > 0) {
    dmrs <- callDMR(
      test, delta = contrast$delta, p.threshold = contrast$p_threshold,
      minlen = contrast$minlen, minCG = contrast$min_cg, dis.merge = contrast$dis_merge,
      pct.sig = contrast$pct_sig
    )
  }
  sites <- in_input_order(test, contigs, "pos")
  if (!is.null(dmrs)) dmrs <- in_input_order(dmrs, contigs, "start")
  rm(test)
  invisible(gc())
  list(sites = sites, dmrs = dmrs)
}

for (i in seq_along(contrasts)) {
  contrast <- contrasts[[i]]
  table <- fread(counts[[i]], sep = "\t", colClasses = list(character = "chrom"))
  group1 <- unlist(contrast$group1)
  group2 <- unlist(contrast$group2)
  cat(sprintf(
    "contrast %s: %s (%s) vs %s (%s), %d sites\n", contrast$name, contrast$label1,
    paste(group1, collapse = ", "), contrast$label2, paste(group2, collapse = ", "), nrow(table)
  ))
  sites <- NULL
  dmrs <- NULL
  if (nrow(table) > 0) {
    contigs <- unique(table$chrom)
    regions <- if ("region" %in% names(table)) split(seq_len(nrow(table)), table$region) else
      list(seq_len(nrow(table)))
    parts <- lapply(seq_along(regions), function(r) {
      rows <- table[regions[[r]]]
      part <- test_region(rows, contrast, group1, group2, contigs)
      if (length(regions) > 1) {
        cat(sprintf(
          "region %d of %d: %d sites (%s to %s); the job so far: %.0f CPU s, peak memory %s\n",
          r, length(regions), nrow(rows), rows$chrom[1], rows$chrom[nrow(rows)],
          sum(proc.time()[c("user.self", "sys.self")]), peak_memory()
        ))
      }
      part
    })
    sites <- do.call(rbind, lapply(parts, `[[`, "sites"))
    dmrs <- do.call(rbind, lapply(parts, `[[`, "dmrs"))
    rm(parts)
    if (length(regions) > 1 && !is.null(sites)) {
      sites$fdr <- p.adjust(sites$pval, method = "BH") # over the shard, as DSS over its input
      if (!is.null(dmrs)) dmrs <- in_input_order(dmrs, contigs, "start")
    }
  }
  line <- sprintf(
    "%s\t%d\t%d\t%d", contrast$name, nrow(table), if (is.null(sites)) 0L else nrow(sites),
    if (is.null(dmrs)) 0L else nrow(dmrs)
  )
  cat(line, "\n")
  summary <- c(summary, line)
  write_table(sites, SITE_COLUMNS, sites_out[[i]])
  write_table(dmrs, DMR_COLUMNS, dmrs_out[[i]])
}
writeLines(summary, summary_out)
