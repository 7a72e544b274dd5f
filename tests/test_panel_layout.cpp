// The panels' layout rules that need no window: which panels fold at a
// window size and text scale and where the lessons go (fit_panels), what the
// "(folded to fit)" note names (track_fit_folded), how a row of texts shortens to
// fit (fit_row), when a pair of buttons stacks, when tabs take brief names
// or a menu (fit_tabs), how the presentation HUD's card fits its column
// (fit_hud_card), how the Next-token panel lays out its candidates
// (fit_candidate_rows) and where wrapped text breaks (wrap_words).
#include <gtest/gtest.h>

#include "app/session/fitting.h"

namespace kvscope {
namespace {

// 1280 x 720 at text scale 2.5, as the layout measures it: sidebars of 345
// (486 beside a folded one; folded 60), the strip 155 tall with its second
// row (97 without, 288 with the lessons), the view's banner and legend 250.
PanelRoom room_720p_at_2_5() {
  return PanelRoom{1280, 720, 345, 60, 155, 288, 250, 486, 97};
}

TEST(FitPanels, ASidebarBesideAFoldedOneTakesItsWiderShare) {
  PanelsOpen open{true, true, false};
  fit_panels(room_720p_at_2_5(), open, false);
  // 1280 - 2 x 345 < 640: the right one folds; 1280 - 486 - 60 = 734 >= 640: the left one stays, wider.
  EXPECT_FALSE(open.right);
  EXPECT_TRUE(open.left);
  // Where even the wider one leaves less than half, it folds too.
  PanelRoom narrow = room_720p_at_2_5();
  narrow.alone = 700;
  open = PanelsOpen{true, true, false};
  fit_panels(narrow, open, false);
  EXPECT_FALSE(open.left || open.right);
}

TEST(FitPanels, AShortPictureTakesTheStripsSecondRow) {
  PanelsOpen open{true, true, false};
  const std::string note = fit_panels(room_720p_at_2_5(), open, false);
  // 720 - 155 - 250 = 315 < half of 720: the strip keeps its timeline row alone (720 - 97 - 250 = 373).
  EXPECT_FALSE(open.full_strip);
  EXPECT_NE(note.find("the history line"), std::string::npos) << note;
  EXPECT_NE(note.find("the right sidebar"), std::string::npos) << note;
}

TEST(FitPanels, TheStripKeepsItsSecondRowWhereThePictureHasRoom) {
  // 1366 x 768 and 1280 x 720 at text scale 1: the picture keeps well over half the height.
  for (const PanelRoom& r :
       {PanelRoom{1366, 768, 290, 30, 70, 307, 150, 290, 45}, PanelRoom{1280, 720, 290, 30, 70, 288, 165, 290, 45}}) {
    PanelsOpen open{true, true, false};
    EXPECT_EQ(fit_panels(r, open, false), "");
    EXPECT_TRUE(open.full_strip && open.left && open.right);
  }
}

TEST(FitPanels, OpenLessonsKeepTheStripWhole) {
  // The lessons the user just opened stay, and with them the strip's second row.
  PanelsOpen open{true, true, true};
  fit_panels(room_720p_at_2_5(), open, /*lessons_kept=*/true);
  EXPECT_TRUE(open.lessons);
  EXPECT_TRUE(open.full_strip);
  // Folded lessons: the second row goes too when the picture is still short.
  open = PanelsOpen{true, true, true};
  fit_panels(room_720p_at_2_5(), open, /*lessons_kept=*/false);
  EXPECT_FALSE(open.lessons);
  EXPECT_FALSE(open.full_strip);
}

TEST(FitRow, EveryTextStaysFullWhereTheRowHasRoom) {
  EXPECT_EQ(fit_row({{100, 50}, {200, 80}}, 10, 400, {1, 0}), (std::vector<int>{0, 0}));
}

TEST(FitRow, TextsShortenInTheGivenOrderUntilTheRowFits) {
  // lessons button (470 | 75), "(folded to fit)" (105 | 55), history (520 | 190); 8 between.
  const std::vector<std::vector<float>> row = {{470, 75}, {105, 55}, {520, 190}};
  // A strip of 800: the history goes brief, the rest stays whole.
  EXPECT_EQ(fit_row(row, 8, 800, {2, 0, 1}), (std::vector<int>{0, 0, 1}));
  // Narrower: then the lessons button, then the marker.
  EXPECT_EQ(fit_row(row, 8, 400, {2, 0, 1}), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(fit_row(row, 8, 300, {2, 0, 1}), (std::vector<int>{1, 1, 1}));
  // Nothing fits: every text at its shortest (the caller cuts the last one).
  EXPECT_EQ(fit_row(row, 8, 100, {2, 0, 1}), (std::vector<int>{1, 1, 1}));
}

TEST(FitRow, AnAbsentTextTakesNoRoom) {
  // The marker is shown only when something folded: no variants, no width, no spacing.
  EXPECT_EQ(fit_row({{300, 75}, {}, {300, 190}}, 8, 610, {2, 0, 1}), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(fit_row({{300, 75}, {}, {300, 190}}, 8, 600, {2, 0, 1}), (std::vector<int>{0, 0, 1}));
}

TEST(ButtonsSideBySide, StackWhenALabelOutgrowsItsShare) {
  // A 345-wide sidebar at text scale 2.5 (content 270): "Generate" needs 170, more than half.
  EXPECT_FALSE(buttons_fit_side_by_side({170, 160}, 10, 270));
  // At text scale 1 (content 255): 70 and 65 fit in 122.5 each.
  EXPECT_TRUE(buttons_fit_side_by_side({70, 65}, 10, 255));
  EXPECT_TRUE(buttons_fit_side_by_side({}, 10, 0));
}

TEST(FitTabs, FullNamesThenBriefOnesThenAMenu) {
  // The five lessons at text scale 2.5: 1,450 wide in full, 830 in brief (spacing 10 between them).
  const std::vector<float> full = {210, 400, 230, 370, 200}, brief = {210, 180, 70, 130, 200};
  EXPECT_EQ(fit_tabs(full, brief, 10, 1500), TabLabels::kFull);
  EXPECT_EQ(fit_tabs(full, brief, 10, 1000), TabLabels::kBrief);
  EXPECT_EQ(fit_tabs(full, brief, 10, 700), TabLabels::kMenu);
  EXPECT_EQ(fit_tabs({}, {}, 10, 0), TabLabels::kFull);
}

// The F5 card at 1280 x 720, text scale 2.5 (as the HUD measures it): the
// headline "next: ·food  100%" 870 wide in the banner font, five candidate
// rows 530 wide with their narrowest bars, 330 tall with the padding.
HudCardSize card_at_2_5() {
  return HudCardSize{870, 98, 530, 330};
}

TEST(FitHudCard, RowsKeepTheirSizeWhereTheColumnHasRoom) {
  const HudCardFit f = fit_hud_card(card_at_2_5(), 1280, 600);
  EXPECT_LE(f.w, kHudCardShare * 1280 + 1e-3f);
  // Read from the back row: the rows keep most of their size, the headline no smaller than them.
  EXPECT_GE(f.rows_k, 0.8f);
  EXPECT_GE(f.title_k * 75.0f, f.rows_k * 43.0f);  // the banner font 75, the rows' 43 px at full size
  EXPECT_NEAR(f.title_k, f.w / 870, 1e-4f);
  // Text scale 1 (everything 2.5 times smaller): the card as wide as its headline, nothing shrinks.
  const HudCardFit one = fit_hud_card(HudCardSize{348, 39, 212, 132}, 1280, 600);
  EXPECT_FLOAT_EQ(one.w, 348);
  EXPECT_FLOAT_EQ(one.rows_k, 1);
  EXPECT_FLOAT_EQ(one.title_k, 1);
}

TEST(FitHudCard, AShortColumnShrinksHeadlineAndRowsAlike) {
  const HudCardFit wide = fit_hud_card(card_at_2_5(), 1280, 600);
  const HudCardFit f = fit_hud_card(card_at_2_5(), 1280, 200);
  EXPECT_LE(98 * f.title_k + 330 * f.rows_k, 200 + 1e-3f);
  EXPECT_NEAR(f.rows_k / f.title_k, wide.rows_k / wide.title_k, 1e-4f);
  EXPECT_LE(f.w, wide.w);
  EXPECT_GE(f.w, 530 * f.rows_k - 1e-3f);
}

// The right sidebar's content at text scale 1.0 (about 320 wide, names up to
// 60, tags like "100.0% pen k p" 95) and at 2.5 (about 330 wide, names up to
// 150, tags 120): a bar needs at least 40 % of the width.
TEST(FitCandidateRows, NameBarAndTagShareARowWhereTheBarKeepsItsRoom) {
  const CandidateRows r = fit_candidate_rows(60, 95, 8, 320, 0.4f * 320);
  EXPECT_FALSE(r.stacked);
  EXPECT_FLOAT_EQ(r.name_w, 60);  // the widest name whole
  EXPECT_FLOAT_EQ(r.bar_x, 68);
  EXPECT_FLOAT_EQ(r.bar_w, 320 - 68 - 8 - 95);    // the widest tag ends at the row's end
  EXPECT_LE(r.bar_x + r.bar_w + 8 + 95, 320.0f);  // nothing past the sidebar's edge
}

TEST(FitCandidateRows, ANarrowSidebarPutsEachNameAboveItsBar) {
  const CandidateRows r = fit_candidate_rows(150, 120, 8, 330, 0.4f * 330);
  EXPECT_TRUE(r.stacked);
  EXPECT_FLOAT_EQ(r.bar_x, 0);
  EXPECT_FLOAT_EQ(r.bar_w, 330);             // the bar takes the whole width
  EXPECT_FLOAT_EQ(r.name_w, 330 - 8 - 120);  // the name and its tag share the line above
  EXPECT_GE(r.name_w, 150.0f);               // so the widest name is whole
}

TEST(FitCandidateRows, ANameWiderThanItsLineIsTheOnlyOneCut) {
  const CandidateRows r = fit_candidate_rows(400, 120, 8, 330, 0.4f * 330);
  EXPECT_TRUE(r.stacked);
  EXPECT_LT(r.name_w, 400.0f);
  EXPECT_FLOAT_EQ(r.name_w + 8 + 120, 330);
}

TEST(ColumnsFit, EachColumnIsAsWideAsItsWidestCell) {
  // "beam + token | log p | Σ log p | kept as" over two rows, 10 of padding per column.
  const std::vector<std::vector<float>> cells = {{120, 50, 70, 70}, {100, 60, 60, 150}, {130, 40, 60, 50}};
  EXPECT_TRUE(columns_fit(cells, 10, 130 + 60 + 70 + 150 + 40));
  EXPECT_FALSE(columns_fit(cells, 10, 130 + 60 + 70 + 150 + 39));
  EXPECT_TRUE(columns_fit({}, 10, 0));
}

TEST(WrapWords, LinesBreakOnlyBetweenWords) {
  // "draw 0.257 lands on ·D (11 kept, 39.4% of the mass)": the number stays whole.
  const std::vector<float> w = {40, 50, 50, 20, 30, 30, 40, 50, 20, 30, 50};
  const std::vector<size_t> starts = wrap_words(w, 10, 200);
  ASSERT_EQ(starts, (std::vector<size_t>{0, 4, 8}));  // 40+50+50+20 and 3 spaces = 190; then 180
}

TEST(WrapWords, AWordWiderThanALineHasALineOfItsOwn) {
  EXPECT_EQ(wrap_words({30, 500, 30}, 10, 200), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(wrap_words({30, 40}, 10, 200), (std::vector<size_t>{0}));
  EXPECT_TRUE(wrap_words({}, 10, 200).empty());
}

// The same window where the lessons may take a column beside the view: a
// sidebar left alone and the column are 422 wide, the timeline row alone 90.
PanelRoom room_720p_at_2_5_with_column() {
  return PanelRoom{1280, 720, 345, 60, 176, 288, 280, 422, 90, 422};
}

TEST(FitPanels, LessonsGoBesideTheViewInAShortWindow) {
  for (const bool kept : {true, false}) {
    PanelsOpen open{true, true, true};
    const std::string note = fit_panels(room_720p_at_2_5_with_column(), open, kept);
    EXPECT_TRUE(open.lessons);
    EXPECT_TRUE(open.lessons_side);  // under the view the picture gets 720 - 288 - 280 = 152
    // Beside them the view keeps half the width only with both sidebars folded:
    // 1280 - 422 - 60 - 422 = 376 < 640, 1280 - 422 - 2 x 60 = 738.
    EXPECT_FALSE(open.right);
    EXPECT_FALSE(open.left);
    EXPECT_NE(note.find("the right sidebar and the left sidebar"), std::string::npos) << note;
    // The picture: 720 - 90 - 280 = 350, over twice what the lessons left under it.
  }
}

TEST(FitPanels, LessonsStayUnderTheViewWhereThePictureHasRoom) {
  // 1366 x 768 at text scale 1: 768 - 307 - 150 = 311 >= 35 % of 768.
  PanelsOpen open{true, true, true};
  EXPECT_EQ(fit_panels(PanelRoom{1366, 768, 290, 30, 70, 307, 150, 0, 45, 290}, open, true), "");
  EXPECT_TRUE(open.lessons && open.left && open.right);
  EXPECT_FALSE(open.lessons_side);
}

TEST(FitPanels, LessonsFoldWhereNoColumnLeavesTheViewHalfTheWidth) {
  PanelRoom r = room_720p_at_2_5_with_column();
  r.W = 900;  // 900 - 422 - 2 x 60 = 358 < 450
  PanelsOpen open{true, true, true};
  fit_panels(r, open, /*lessons_kept=*/false);
  EXPECT_FALSE(open.lessons);
  EXPECT_FALSE(open.lessons_side);
}

TEST(FitPanels, LessonsClosedLeaveTheColumn) {
  PanelsOpen open{false, false, false};
  open.lessons_side = true;
  fit_panels(room_720p_at_2_5_with_column(), open, false);
  EXPECT_FALSE(open.lessons_side);
}

TEST(FitPanels, ClosedLessonsGiveBackTheSidebarsFoldedForThem) {
  // The lessons open beside the view, both sidebars fold for them.
  PanelsOpen before{true, false, true};  // the right one folded to fit at this size already
  FitFolded folded;
  folded.right = true;
  PanelsOpen open = before;
  fit_panels(room_720p_at_2_5_with_column(), open, true);
  folded = track_fit_folded(folded, before, open);
  EXPECT_TRUE(folded.left && folded.right);
  // Closed, the left sidebar comes back; the right one folds again for width
  // (1280 - 2 x 345 < 640) and the note still names it.
  open.lessons = false;
  before = open;
  fit_lessons_closed(room_720p_at_2_5_with_column(), open, folded);
  folded = track_fit_folded(folded, before, open);
  EXPECT_TRUE(open.left);
  EXPECT_FALSE(open.right);
  EXPECT_FALSE(open.lessons_side);
  EXPECT_FALSE(folded.left);
  EXPECT_NE(fit_folded_note(folded).find("the right sidebar"), std::string::npos) << fit_folded_note(folded);
}

TEST(FitFolded, TheNoteStandsWhileWhatFittingFoldedStaysFolded) {
  // Text scale 2.5, a roomy strip: the right sidebar folds for width, the lessons fit under the view.
  const PanelRoom room{1280, 720, 345, 60, 70, 250, 100};
  FitFolded folded;
  PanelsOpen before{true, true, false};
  PanelsOpen after = before;
  EXPECT_NE(fit_panels(room, after, false), "");
  folded = track_fit_folded(folded, before, after);
  EXPECT_NE(fit_folded_note(folded).find("the right sidebar"), std::string::npos);

  // The lessons open and nothing new folds: the right sidebar is still folded, and the note says so.
  before = after;
  before.lessons = true;
  after = before;
  EXPECT_EQ(fit_panels(room, after, true), "");
  EXPECT_FALSE(after.right);
  folded = track_fit_folded(folded, before, after);
  EXPECT_NE(fit_folded_note(folded).find("the right sidebar"), std::string::npos) << fit_folded_note(folded);
  // A frame without fitting keeps it too.
  folded = track_fit_folded(folded, after, after);
  EXPECT_NE(fit_folded_note(folded), "");

  // The user opens the sidebar again: nothing is folded by fitting any more.
  after.right = true;
  folded = track_fit_folded(folded, after, after);
  EXPECT_EQ(fit_folded_note(folded), "");
}

TEST(FitFolded, WhatTheUserFoldedIsNotCalledFolded) {
  PanelsOpen open{false, false, false};  // folded by clicks, no fitting this frame
  EXPECT_EQ(fit_folded_note(track_fit_folded(FitFolded{}, open, open)), "");
  FitFolded f;
  f.lessons = f.history = f.left = true;
  EXPECT_EQ(fit_folded_note(f).find("folded the lessons and the history line"), 0u) << fit_folded_note(f);
}

}  // namespace
}  // namespace kvscope
